"""An agent env's step and reset phases in ONE launch equal one launch per phase, bit for bit.

`kernelgym.core.bind_launches` fuses the phase programs of an agent env: each env's agents in
one block (its threads striding over them where they outnumber its threads, as at WarpDrive's
1,000 agents), a block barrier between phases on cuda and in the simulator, phase by phase
over an env's agents on cpu. Each Tag env runs here twice from the same seed and actions:
fused (the default) and with one launch per phase (the fusion switched off for that env's
make), on cpu and in the simulator, both autoreset modes, the action check on, through
several episodes; and with more agents than a block's threads (300 against 256 on cpu; in the
simulator a few dozen against a block lowered to 16 threads).
"""

import numpy as np
import pytest

import kernelgym.envs as kge
from kernelgym.core import binding

CASES = [
    ("TagGridWorld-v0", {"num_taggers": 3, "num_runners": 2, "grid_length": 4, "episode_length": 9}),
    ("TagContinuous-v0", {"num_taggers": 2, "num_runners": 5, "episode_length": 7, "num_other_agents_observed": 3}),
]


def one_launch_per_phase(programs, num_envs, num_agents):
    return programs


def rollout(env_id, params, backend, num_envs, steps, mode, fused, monkeypatch):
    with monkeypatch.context() as patch:
        if not fused:
            patch.setattr(binding, "_fused", one_launch_per_phase)
        env = kge.make(env_id, num_envs, backend=backend, seed=4, autoreset_mode=mode, **params)
    launches = (len(env._step_launch.records), len(env._launch_reset.records))
    env.action_space.seed(7)
    outputs = [env.reset(seed=4, numpy=True)[0]]
    for _ in range(steps):
        outputs.append(env.step(np.asarray(env.action_space.sample()), numpy=True)[:4])
    env.close()
    return launches, outputs


def assert_same(a, b):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            assert_same(a[key], b[key])
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y)
    else:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize(("env_id", "params"), CASES)
@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_fused_phases_equal_one_launch_per_phase_on_cpu(env_id, params, mode, monkeypatch):
    fused = rollout(env_id, params, "cpu", 5, 25, mode, True, monkeypatch)
    phased = rollout(env_id, params, "cpu", 5, 25, mode, False, monkeypatch)
    assert fused[0] == (1, 1) and phased[0][0] > 1
    assert_same(fused[1], phased[1])


@pytest.mark.sim
@pytest.mark.parametrize(("env_id", "params"), CASES)
def test_fused_phases_equal_one_launch_per_phase_and_cpu_in_the_simulator(env_id, params, monkeypatch):
    fused = rollout(env_id, params, "sim", 3, 12, "next_step", True, monkeypatch)
    phased = rollout(env_id, params, "sim", 3, 12, "next_step", False, monkeypatch)
    cpu = rollout(env_id, params, "cpu", 3, 12, "next_step", True, monkeypatch)
    assert fused[0] == (1, 1) and phased[0][0] > 1
    assert_same(fused[1], phased[1])
    assert_same(fused[1], cpu[1])


# more agents than a block's threads (kernels.MAX_AGENT_THREADS = 256): the block strides.
# Small, for the simulator (a Python thread per GPU thread: minutes per rollout at this size)
BIG_CASES = [
    ("TagGridWorld-v0", {"num_taggers": 290, "num_runners": 10, "grid_length": 30, "episode_length": 4}),
    (
        "TagContinuous-v0",
        {"num_taggers": 250, "num_runners": 10, "episode_length": 2, "num_other_agents_observed": 4},
    ),
]


@pytest.mark.parametrize(("env_id", "params"), BIG_CASES)
def test_agents_that_outnumber_a_block_step_in_one_launch_equal_to_per_phase_on_cpu(env_id, params, monkeypatch):
    fused = rollout(env_id, params, "cpu", 2, 7, "next_step", True, monkeypatch)
    phased = rollout(env_id, params, "cpu", 2, 7, "next_step", False, monkeypatch)
    assert fused[0] == (1, 1) and phased[0][0] > 1
    assert_same(fused[1], phased[1])


# the simulator runs a Python thread per GPU thread: there a block of 16 threads, which a few
# dozen agents outnumber, strides as a block of 256 does at WarpDrive's 1,000 agents
SIMULATOR_BLOCK = 16
SIMULATOR_BIG_CASES = [
    ("TagGridWorld-v0", {"num_taggers": 30, "num_runners": 6, "grid_length": 12, "episode_length": 4}),
    (
        "TagContinuous-v0",
        {"num_taggers": 24, "num_runners": 6, "episode_length": 2, "num_other_agents_observed": 4},
    ),
]


@pytest.mark.sim
@pytest.mark.parametrize(("env_id", "params"), SIMULATOR_BIG_CASES)
def test_agents_that_outnumber_a_block_step_in_one_launch_equal_to_per_phase_in_the_simulator(
    env_id, params, monkeypatch
):
    from kernelgym.core import kernels

    monkeypatch.setattr(kernels, "MAX_AGENT_THREADS", SIMULATOR_BLOCK)
    num_agents = params["num_taggers"] + params["num_runners"]
    assert kernels.agent_grid(2, num_agents) == (2, SIMULATOR_BLOCK)  # one env per block, striding
    # against the cpu's fused step, which the cpu test holds equal to the per-phase step
    fused = rollout(env_id, params, "sim", 2, 3, "next_step", True, monkeypatch)
    cpu = rollout(env_id, params, "cpu", 2, 3, "next_step", True, monkeypatch)
    assert fused[0] == (1, 1)
    assert_same(fused[1], cpu[1])
