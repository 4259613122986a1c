"""The example plugin, pip-installed (tox env `integration`), found through its entry point."""

import os
import subprocess
import sys
import textwrap
from importlib import metadata

import gymnasium
import numpy as np
import pytest
import torch

import kernelgym.envs as kge

DISTRIBUTION = "kernelgym-example-plugin"


@pytest.fixture(scope="module", autouse=True)
def installed():
    try:
        metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        pytest.fail(
            f"{DISTRIBUTION} is not installed: pip install ./examples/kernelgym-example-plugin "
            "(tox -e integration does)"
        )


def test_installed_plugin_is_discovered_with_its_provider():
    assert "GoRight-v0" in kge.list_envs()
    spec = kge.get_spec("GoRight-v0")
    assert spec.distribution == DISTRIBUTION
    assert spec.plugin == "go_right"


def test_installed_plugin_runs_and_reaches_its_goal():
    env = kge.make("GoRight-v0", 64, backend="cpu", seed=0, slip=0.0, start_max=0, length=3)
    env.reset()
    right = torch.ones(64, dtype=torch.int64)
    for _ in range(2):
        _, rewards, terminated, _, _ = env.step(right)
        assert not terminated.any()
    _, rewards, terminated, truncated, _ = env.step(right)
    assert terminated.all() and not truncated.any() and (rewards == 1.0).all()


def test_installed_plugin_through_gymnasium():
    envs = gymnasium.make_vec(
        "kernelgym/GoRight-v0", num_envs=4, vectorization_mode="vector_entry_point", backend="cpu"
    )
    obs, _ = envs.reset(seed=0)
    assert obs.shape == (4, 1) and envs.observation_space.contains(obs)
    obs, rewards, terminated, truncated, _ = envs.step(np.ones(4, dtype=np.int64))
    assert rewards.shape == (4,)
    envs.close()


def test_autoload_switch_hides_it_until_registered_explicitly():
    code = textwrap.dedent("""
        import kernelgym.envs as kge
        assert "GoRight-v0" not in kge.list_envs(), "autoload was not switched off"
        assert "CartPole-v1" in kge.list_envs()
        kge.register_plugin("kernelgym_example_plugin.go_right")
        assert kge.get_spec("GoRight-v0").plugin == "kernelgym_example_plugin.go_right"
        print("ok")
    """)
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "KERNELGYM_NO_PLUGIN_AUTOLOAD": "1"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
