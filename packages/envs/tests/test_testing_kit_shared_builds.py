"""The kit's checks share compiled programs: out_of_bounds runs the kernels in the env's own
step program (on canary-padded copies of its buffers), so parity compiles nothing more, and
params drawn by the checks are launcher arguments, so every draw runs one compile.

A check's compiles are counted as the typed signatures of every launcher module imported
(a compile, or a load from numba's disk cache, adds one): the count is the same whether
the disk cache is cold or warm.
"""

import sys

import numpy as np

from kernelgym.core import env_kernel, rng
from kernelgym.core.codegen import LAUNCHER_PACKAGE
from kernelgym.envs.testing import check_env
from kernelgym.envs.testing.checks import CheckConfig, check_out_of_bounds, check_parity
from kernelgym.envs.testing.harness import EnvHarness, checking
from kit_fixtures import walk

SEED = 20261128


@env_kernel
def reset_off_by_one(i, rng_states, obs, position, energy, goal, start_range):
    """BUG: the energy is also written one column past the observation row (a column computed
    from the data, which the launch check cannot see)."""
    position[i] = rng.randint(rng_states, i, 2 * start_range + 1) - start_range
    energy[i] = 0.0
    obs[i, 0] = position[i] / goal
    obs[i, 1] = energy[i]
    past = 2 if energy[i] >= 0.0 else 1  # always column 2
    obs[i, past] = energy[i]


RESET_OFF_BY_ONE = walk._spec("WalkResetOffByOne-v0", reset_kernel=reset_off_by_one)


def _typed_launchers() -> int:
    """How many (launcher, signature) builds this process holds."""
    count = 0
    for name, module in list(sys.modules.items()):
        if not name.startswith(LAUNCHER_PACKAGE + ".") or module is None:
            continue
        for attribute in ("cpu_launcher", "cpu_serial_launcher", "cpu_permuted_launcher"):
            dispatcher = getattr(module, attribute, None)
            count += len(getattr(dispatcher, "signatures", ()))
    return count


def test_an_off_by_one_write_in_the_reset_kernel_is_found_on_cpu():
    report = check_env(RESET_OFF_BY_ONE, backend="cpu", max_examples=10, seed=SEED, checks=["out_of_bounds"])
    result = report["out_of_bounds"]
    assert result.status == "failed", result.message
    assert "reset_kernel wrote outside its rows: 'obs' after env" in result.message
    assert "step_kernel" not in result.message  # the step kernel writes its own rows only


def test_parity_after_out_of_bounds_builds_nothing_more(monkeypatch):
    monkeypatch.setenv("KERNELGYM_CPU_THREADS", "one")
    harness = EnvHarness(walk.SPEC, "cpu")
    config = CheckConfig(max_examples=6, seed=SEED)
    with checking("cpu"):
        check_out_of_bounds(harness, config)
        built = _typed_launchers()
        check_parity(harness, config)
    assert _typed_launchers() == built


def test_every_params_value_a_check_makes_runs_one_build(monkeypatch):
    monkeypatch.setenv("KERNELGYM_CPU_THREADS", "one")
    monkeypatch.setenv("KERNELGYM_PARAMS", "constants")  # the kit's choice wins while a check runs
    harness = EnvHarness(walk.SPEC, "cpu")
    with checking("cpu"):
        first = harness.with_params({"goal_reward": 1.5, "step_cost": 0.25}).make_env(3, seed=1)
        first.step(np.ones(3, np.int64))
        built = _typed_launchers()
        for goal_reward, step_cost in ((7.0, 0.5), (-2.0, 3.0)):
            env = harness.with_params({"goal_reward": goal_reward, "step_cost": step_cost}).make_env(3, seed=1)
            _, rewards, terminated, _, _ = env.step(np.full(3, 2, np.int64), numpy=True)
            expected = np.where(terminated, goal_reward, -step_cost).astype(np.float32)
            assert rewards.tobytes() == expected.tobytes()  # the values reached the kernel as arguments
    assert _typed_launchers() == built
