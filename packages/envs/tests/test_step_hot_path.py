"""The step hot path: no per-step allocation, actions checked in the launch, no host sync on a device.

The cuda logic (deferred action check) is proved on the simulator, which runs the very
``cuda.jit`` launchers: a bad action there is recorded on the device, its env is not
stepped, and the error surfaces at the next read of results.
"""

import gc
import re
import tracemalloc

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import kernelgym.envs as kge
from kernelgym.envs.runtime.actions import check_mode


def _kernelgym_traces(snapshot):
    return snapshot.filter_traces([tracemalloc.Filter(True, "*kernelgym*")])


def _kept_blocks(snapshot) -> int:
    return sum(stat.count for stat in _kernelgym_traces(snapshot).statistics("filename"))


@pytest.mark.parametrize("as_numpy", [False, True])
def test_steps_allocate_nothing_that_stays(as_numpy):
    """What step() keeps does not grow with the number of steps.

    Numba keeps a bounded pool of small blocks (a few hundred, whatever the number of
    calls) when it unboxes a struct argument, as the launch's packed arrays are: so the
    test counts the blocks kept over 1,000 and then 10,000 more steps, and an allocation
    kept by as few as one step in ten fails it.
    """
    env = kge.make("CartPole-v1", 64, backend="cpu", seed=0)
    env.reset()
    batches = [np.random.default_rng(k).integers(0, 2, 64) for k in range(4)]
    batches = batches if as_numpy else [torch.from_numpy(batch) for batch in batches]
    for k in range(50):  # warm up: compiled, views made
        env.step(batches[k % 4])
    kept = []
    tracemalloc.start()
    try:
        for steps in (0, 1_000, 10_000):
            for k in range(steps):
                env.step(batches[k % 4])
            # gc.collect also empties CPython's free lists, which keep freed argument tuples
            gc.collect()
            kept.append(_kept_blocks(tracemalloc.take_snapshot()))
    finally:
        tracemalloc.stop()
    assert kept[2] - kept[0] < 11_000 / 10, f"step() keeps allocations: {kept} blocks after 0, 1,000, 11,000 steps"


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


@pytest.mark.parametrize("backend, mode", [("cpu", "sync"), ("sim", "deferred"), ("cuda", "deferred")])
def test_check_action_values_true_is_sync_on_cpu_and_deferred_on_the_simulator_as_on_cuda(backend, mode):
    # the simulator models the GPU: a test green there must meet the deferred error cuda gives
    assert check_mode(True, backend) == mode
    assert check_mode("sync", backend) == "sync" and check_mode("deferred", backend) == "deferred"
    assert check_mode(False, backend) is None


@pytest.mark.sim
def test_the_simulator_defers_a_bad_action_by_default():
    env = kge.make("CartPole-v1", 3, backend="sim", seed=0)
    env.reset()
    env.step(torch.tensor([0, 9, 1]))  # returns, as on cuda
    with pytest.raises(ValueError, match=r"got 9 at index \(1,\)"):
        env.check_actions()


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

    env = kge.make(
        "CartPole-v1",
        4,
        backend="sim",
        seed=0,
        check_action_values="deferred",
        autoreset_mode=autoreset_mode,
        max_episode_steps=3,
    )
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


# ------------------------------------------------------------------ serial and parallel cpu launches
@pytest.mark.parametrize(
    "env_id, autoreset_mode",
    [("CartPole-v1", "next_step"), ("CartPole-v1", "same_step"), ("TagGridWorld-v0", "next_step")],
)
def test_serial_and_parallel_cpu_launches_step_alike_bit_for_bit(monkeypatch, env_id, autoreset_mode):
    """Few envs run in the calling thread (binding.PARALLEL_FROM): the same program, same bits."""
    from kernelgym.core import binding

    def made(parallel_from):
        monkeypatch.setattr(binding, "PARALLEL_FROM", parallel_from)
        monkeypatch.setenv("KERNELGYM_CPU_THREADS", "all")  # the team's build, whatever the runner's default
        env = kge.make(env_id, 6, backend="cpu", seed=4, autoreset_mode=autoreset_mode, max_episode_steps=7)
        env.reset()
        return env

    def launchers(env):
        launch = env._launch_step  # the compiled launcher, or BoundLaunch.__call__ over several
        calls = launch.__self__._calls if hasattr(launch, "__self__") else [launch]
        return {call.func.py_func.__name__ for call in calls}

    serial, parallel = made(10**9), made(1)
    assert launchers(serial) == {"cpu_serial_launcher"} and launchers(parallel) == {"cpu_launcher"}
    rng = np.random.default_rng(0)
    for _ in range(20):
        actions = rng.integers(0, parallel.single_action_space.n, parallel.action_space.shape)
        got, want = serial.step(actions, numpy=True), parallel.step(actions, numpy=True)
        for a, b in zip(got[:4], want[:4]):
            assert np.array_equal(a, b)
        assert all(np.array_equal(a, b) for a, b in zip(serial.get_state().values(), parallel.get_state().values()))


def test_the_reset_runs_the_serial_twin_whatever_the_strategy(monkeypatch):
    """reset() runs rarely: a cold make compiles its serial twin only (not the team's build too)."""
    monkeypatch.setenv("KERNELGYM_CPU_THREADS", "all")
    env = kge.make("CartPole-v1", 256, backend="cpu", seed=4)
    reset, step = env._launch_reset.as_function(), env._launch_step
    assert reset.func.py_func.__name__ == "cpu_serial_launcher"
    assert step.func.py_func.__name__ == "cpu_launcher"  # the step keeps the strategy's team
    obs, _ = env.reset(seed=4, numpy=True)
    assert obs.shape == (256, 4) and np.all(np.abs(obs) <= 0.05)  # CartPole's start: U(-0.05, 0.05)
    env.close()


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_a_bad_action_among_many_is_named_by_its_first_index_and_changes_nothing(data):
    """Either side of PARALLEL_FROM and of the parallel check: one error, the first bad
    index and value, as the caller passed it; no env steps (cpu)."""
    env_id = data.draw(st.sampled_from(["CartPole-v1", "TagGridWorld-v0", "Pendulum-v1"]), label="env")
    # serial launch, parallel launch, parallel check (codegen.SERIAL_CHECK_BELOW)
    num_envs = data.draw(st.sampled_from([3, 200, *([70_000] if env_id == "CartPole-v1" else [])]), label="num_envs")
    env = _checked_env(env_id, num_envs)
    shape = env.action_space.shape
    if env_id == "Pendulum-v1":
        actions = np.zeros(shape, np.float32)
        bad_value = data.draw(st.sampled_from([np.nan, np.inf, -np.inf]), label="bad")
    else:
        actions = np.zeros(shape, np.int64)
        bad_value = data.draw(st.sampled_from([-1, int(env.single_action_space.n), 99]), label="bad")
    flat = data.draw(st.lists(st.integers(0, actions.size - 1), min_size=1, max_size=4, unique=True), label="bad at")
    actions.reshape(-1)[flat] = bad_value
    first = tuple(int(k) for k in np.unravel_index(min(flat), shape))
    before = env.get_state()
    shown = repr(float(bad_value)) if env_id == "Pendulum-v1" else repr(bad_value)
    with pytest.raises(ValueError, match=rf"got {re.escape(shown)} at index {re.escape(str(first))}"):
        env.step(actions)
    assert all(np.array_equal(before[name], after, equal_nan=True) for name, after in env.get_state().items())
    env.step(np.zeros(shape, actions.dtype))  # the record was cleared


_ENVS = {}


def _checked_env(env_id, num_envs):
    """One env per (id, size), reset, reused across examples (compiling costs seconds)."""
    key = (env_id, num_envs)
    if key not in _ENVS:
        # the team's build where the envs reach PARALLEL_FROM, whatever the runner's
        # KERNELGYM_CPU_THREADS (tox's envs env runs one thread): the tests here cross the limit
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("KERNELGYM_CPU_THREADS", "adaptive")
            _ENVS[key] = kge.make(env_id, num_envs, backend="cpu", seed=0)
    _ENVS[key].reset(seed=0)
    return _ENVS[key]


@pytest.mark.sim
def test_a_deferred_bad_action_of_a_multi_action_env_is_kept_on_the_device():
    env = kge.make("TagGridWorld-v0", 2, backend="sim", seed=0, check_action_values="deferred")
    env.reset()
    actions = np.zeros(env.action_space.shape, np.int64)
    actions[1, 3] = 8
    env.step(torch.from_numpy(actions))
    env.step(torch.zeros(env.action_space.shape, dtype=torch.int64))  # moves the action buffer on
    with pytest.raises(ValueError, match=r"got 8 at index \(1, 3\)"):
        env.check_actions()


def test_episode_statistics_can_be_left_out():
    env = kge.make("CartPole-v1", 8, backend="cpu", seed=0, episode_statistics=False, max_episode_steps=3)
    env.reset()
    for _ in range(4):
        *_, info = env.step(np.ones(8, np.int64))
        assert "episode" not in info and "_episode" not in info
    with pytest.raises(TypeError, match=r"episode_statistics: expected True or False, got 'yes'"):
        kge.make("CartPole-v1", 2, backend="cpu", episode_statistics="yes")
