"""The example plugin (examples/kernelgym-example-plugin) used straight from its source tree.

Nothing is installed here: the module is imported from the source folder and given to
`register_plugin`. tests/test_example_plugin_install.py checks the installed package.
"""

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest
import tomllib
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import kernelgym.envs as kge
from kernelgym.core import rng

PLUGIN_ROOT = Path(__file__).resolve().parents[3] / "examples" / "kernelgym-example-plugin"


@pytest.fixture(scope="module")
def go_right():
    sys.path.insert(0, str(PLUGIN_ROOT / "src"))
    try:
        module = importlib.import_module("kernelgym_example_plugin.go_right")
    finally:
        sys.path.remove(str(PLUGIN_ROOT / "src"))
    if "GoRight-v0" not in kge.list_envs():  # already there when the package is installed
        kge.register_plugin(module, name="go_right")
    return module


def test_pyproject_declares_the_entry_point_to_the_hook_module(go_right):
    project = tomllib.loads((PLUGIN_ROOT / "pyproject.toml").read_text())["project"]
    entry_points = project["entry-points"]["kernelgym.envs"]
    # each env in its own module, each with its own entry point and declared id
    assert entry_points == {
        name: f"kernelgym_example_plugin.{name}" for name in ("go_right", "ring", "point_mass", "grid_goal", "maze")
    }
    ids = project["entry-points"]["kernelgym.envs.ids"]
    assert ids == {
        "GoRight-v0": "kernelgym_example_plugin.go_right",
        "Ring-v0": "kernelgym_example_plugin.ring",
        "PointMass-v0": "kernelgym_example_plugin.point_mass",
        "GridGoal-v0": "kernelgym_example_plugin.grid_goal",
        "ImageMaze-v0": "kernelgym_example_plugin.maze",
    }
    assert hasattr(go_right, "kernelgym_register_envs")
    assert {"kernelgym-core", "kernelgym-envs"} <= {dep.split(">")[0].split("=")[0] for dep in project["dependencies"]}


@settings(max_examples=25)
@given(
    positions=st.lists(st.integers(0, 9), min_size=8, max_size=8),
    actions=st.lists(st.integers(0, 1), min_size=8, max_size=8),
)
def test_kernel_matches_reference_without_slip(go_right, positions, actions):
    params = go_right.GoRightParams(slip=0.0)
    env = kge.make("GoRight-v0", 8, backend="cpu", seed=0, slip=0.0)
    env.set_state({"position": np.array(positions, dtype=np.int32)})
    obs, rewards, terminated, _, _ = env.step(torch.tensor(actions), numpy=True)
    for index, (position, action) in enumerate(zip(positions, actions)):
        state = {"position": np.int32(position).reshape(())}
        new_state, reward, done = go_right.reference.step(params, state, action, rng.seed_streams(index, 1))
        assert env.get_state(index)["position"] == new_state["position"]
        np.testing.assert_allclose(obs[index], go_right.reference.observe(params, new_state))
        assert rewards[index] == np.float32(reward) and terminated[index] == done


def test_slip_rate_and_start_cells_follow_the_params(go_right):
    n = 4000
    env = kge.make("GoRight-v0", n, backend="cpu", seed=1, slip=0.25, start_max=2)
    env.reset()
    start = env.get_state()["position"]
    assert set(np.unique(start)) == {0, 1, 2}
    env.set_state({"position": np.full(n, 5, dtype=np.int32)})
    env.step(torch.ones(n, dtype=torch.int64))
    moved_left = np.mean(env.get_state()["position"] == 4)
    assert abs(moved_left - 0.25) < 0.03
    for _ in range(60):
        env.step(torch.ones(n, dtype=torch.int64))
        state = env.get_state()
        for index in range(0, n, 500):
            go_right.invariants(env.params, {"position": state["position"][index]})


def test_bad_params_are_refused(go_right):
    with pytest.raises(ValueError, match="start_max"):
        kge.make("GoRight-v0", 2, backend="cpu", start_max=10)
    with pytest.raises(TypeError, match="length"):
        kge.make("GoRight-v0", 2, backend="cpu", length=2.5)


@pytest.mark.sim
def test_example_kernel_in_simulator_matches_cpu(go_right):
    cpu = kge.make("GoRight-v0", 8, backend="cpu", seed=4)
    sim = kge.make("GoRight-v0", 8, backend="sim", seed=4)
    assert torch.equal(cpu.reset()[0], sim.reset()[0])
    for _ in range(10):
        actions = torch.ones(8, dtype=torch.int64)
        for want, have in zip([t.clone() for t in cpu.step(actions)[:4]], sim.step(actions)[:4]):
            assert torch.equal(want, have)
