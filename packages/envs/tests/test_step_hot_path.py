"""The step hot path: no per-step allocation, actions checked in the launch, no host sync on a device.

The cuda logic (deferred action check) is proved on the simulator, which runs the very
``cuda.jit`` launchers: a bad action there is recorded on the device, its env is not
stepped, and the error surfaces at the next read of results.
"""

import tracemalloc

import numpy as np
import pytest
import torch

import kernelgym.envs as kge


def _kernelgym_traces(snapshot):
    return snapshot.filter_traces([tracemalloc.Filter(True, "*kernelgym*")])


@pytest.mark.parametrize("as_numpy", [False, True])
def test_steps_allocate_nothing_that_stays(as_numpy):
    env = kge.make("CartPole-v1", 64, backend="cpu", seed=0)
    env.reset()
    batches = [np.random.default_rng(k).integers(0, 2, 64) for k in range(4)]
    batches = batches if as_numpy else [torch.from_numpy(batch) for batch in batches]
    for k in range(50):  # warm up: compiled, views made
        env.step(batches[k % 4])
    tracemalloc.start()
    try:
        before = _kernelgym_traces(tracemalloc.take_snapshot())
        for k in range(500):
            env.step(batches[k % 4])
        after = _kernelgym_traces(tracemalloc.take_snapshot())
    finally:
        tracemalloc.stop()
    grown = [stat for stat in after.compare_to(before, "lineno") if stat.size_diff > 0 or stat.count_diff > 0]
    assert grown == [], f"step() keeps allocations: {grown[:5]}"


def test_actions_of_the_buffer_dtype_reach_the_kernel_without_a_copy():
    n = 65_536
    env = kge.make("CartPole-v1", n, backend="cpu", seed=0)
    env.reset()
    actions = np.random.default_rng(0).integers(0, 2, n)
    env.step(actions)
    tracemalloc.start()
    try:
        for _ in range(5):
            env.step(actions)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < actions.nbytes // 4, f"a step allocated {peak} bytes at its peak (a copy of the actions?)"


@pytest.mark.parametrize("mode", [True, "sync", "deferred"])
def test_cpu_refuses_bad_actions_before_step_returns_and_changes_nothing(mode):
    env = kge.make("CartPole-v1", 5, backend="cpu", seed=1, check_action_values=mode)
    env.reset()
    before, obs_before = env.get_state(), env.numpy().obs.copy()
    with pytest.raises(ValueError, match=r"expected values in Discrete\(2\), got 5 at index \(3,\)"):
        env.step(np.array([0, 1, 0, 5, 9]))
    assert all(np.array_equal(before[name], env.get_state()[name]) for name in before)
    assert np.array_equal(obs_before, env.numpy().obs)
    env.step(np.array([0, 1, 0, 1, 1]))  # the record was cleared
    env.check_actions()


def test_other_dtypes_and_layouts_are_copied_once_and_checked_alike():
    env = kge.make("CartPole-v1", 4, backend="cpu", seed=3)
    reference = kge.make("CartPole-v1", 4, backend="cpu", seed=3)
    env.reset()
    reference.reset()
    actions = np.array([[1, 0], [0, 0], [1, 0], [1, 0]], dtype=np.int32)[:, 0]  # int32, strided
    got = env.step(actions, numpy=True)
    want = reference.step(actions.astype(np.int64), numpy=True)
    assert all(np.array_equal(a, b) for a, b in zip(got[:4], want[:4]))
    with pytest.raises(ValueError, match=r"got -3 at index \(1,\)"):
        env.step(np.array([1, -3, 0, 0], dtype=np.int8))


@pytest.mark.sim
def test_deferred_check_on_the_simulator_skips_the_bad_env_and_raises_at_the_next_read():
    sim = kge.make("CartPole-v1", 4, backend="sim", seed=2, check_action_values="deferred")
    cpu = kge.make("CartPole-v1", 4, backend="cpu", seed=2)
    sim.reset()
    cpu.reset()
    before = sim.get_state()
    sim.step(torch.tensor([0, 1, 7, 0]))  # returns: no host read on the way
    cpu.step(torch.tensor([0, 1, 0, 0]))
    with pytest.raises(ValueError, match=r"expected values in Discrete\(2\), got 7 at index \(2,\)"):
        sim.numpy()
    after, stepped = sim.get_state(), cpu.get_state()
    for name in before:
        assert after[name][2] == before[name][2]  # the bad env was not stepped
        assert np.array_equal(np.delete(after[name], 2), np.delete(stepped[name], 2))  # the others were


@pytest.mark.sim
@pytest.mark.parametrize("read", ["numpy", "reset", "get_state", "check_actions", "close"])
def test_every_read_of_results_raises_a_deferred_bad_action_once(read):
    env = kge.make("CartPole-v1", 3, backend="sim", seed=0, check_action_values="deferred")
    env.reset()
    env.step(torch.tensor([4, 0, -1]))  # two bad: the smallest index is kept
    with pytest.raises(ValueError, match=r"got 4 at index \(0,\)"):
        getattr(env, read)()
    if read != "close":
        getattr(env, read)()  # cleared


@pytest.mark.sim
@pytest.mark.parametrize("autoreset_mode", ["next_step", "same_step"])
def test_the_deferred_device_step_path_reads_nothing_back_from_the_device(monkeypatch, autoreset_mode):
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    env = kge.make("CartPole-v1", 4, backend="sim", seed=0, check_action_values="deferred",
                   autoreset_mode=autoreset_mode, max_episode_steps=3)
    env.reset()
    sync = kge.make("CartPole-v1", 4, backend="sim", seed=0, check_action_values="sync")
    sync.reset()

    def host_read(*args, **kwargs):
        raise AssertionError("a device-to-host read in the step path")

    monkeypatch.setattr(FakeCUDAArray, "copy_to_host", host_read)
    monkeypatch.setattr(torch.Tensor, "item", host_read)
    monkeypatch.setattr(torch.Tensor, "__bool__", host_read)
    for k in range(5):
        env.step(torch.tensor([k % 2, 1, 0, 9 if k == 4 else 1]))
    with pytest.raises(AssertionError, match="device-to-host"):
        sync.step(torch.ones(4, dtype=torch.int64))  # the synchronous check does read: the probe sees it
    monkeypatch.undo()
    with pytest.raises(ValueError, match=r"got 9 at index \(3,\)"):
        env.check_actions()
