"""The host path of a prebuilt cuda step, on the CPU with the driver call stubbed.

A CartPole env made on the cpu backend holds the same launches a cuda env binds (the
bound records: configuration, counts, bound arrays, per-call templates). Each is prebuilt
over stand-in device arrays of the env's own buffers (`prebuilt_launch.stand_in_device_array`)
with ``cuLaunchKernel`` replaced by a counter: the Python of a cuda step, without a GPU.
It must make one driver call per kernel and allocate no memory per step.
"""

import os
import tracemalloc

import pytest

import kernelgym.envs as kge

pytestmark = pytest.mark.skipif(
    os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", reason="the simulator replaces numba-cuda's launch"
)


def stubbed_step(env):
    """The env's step launches over stand-ins, their per-call templates, and the list the stub pops."""
    from kernelgym.core.prebuilt_launch import stand_in_launches

    calls = [None] * 100_000  # a call pops one: counting allocates nothing (appending would)
    succeeded = (0,)

    def launch_kernel(*arguments):
        calls.pop()
        return succeeded

    launches, _, per_call = stand_in_launches(env._step_launch, launch_kernel)
    return launches, calls, per_call


@pytest.mark.parametrize("num_envs", [64, 4096])
def test_a_stubbed_cartpole_step_makes_one_driver_call_per_kernel_and_allocates_nothing(num_envs):
    env = kge.make("CartPole-v1", num_envs, backend="cpu", seed=0)
    launches, calls, per_call = stubbed_step(env)
    # every array the step binds is a parameter: 30+ arrays, 5 + 2 x ndim parameters each
    assert len(launches) == len(env._step_launch.records) >= 1
    assert sum(launch.num_parameters for launch in launches) > 5 * 30

    def step():  # a while loop: no iterator object of the test's own per step
        index = 0
        while index < len(launches):
            launches[index](*per_call[index])
            index += 1

    budget = len(calls)
    step()
    assert budget - len(calls) == len(launches)
    tracemalloc.start()
    try:
        step()  # a first traced call may fill caches
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        remaining = 200  # small ints and a while loop: the test's own loop allocates nothing either
        while remaining:
            step()
            remaining -= 1
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak - before == 0 and current <= before
    assert budget - len(calls) == 202 * len(launches)
    env.close()


@pytest.mark.parametrize(("env_id", "phases"), [("CartPole-v1", 1), ("TagGridWorld-v0", 4)])
def test_the_gpu_compile_table_counts_each_steps_launches_and_the_parameter_bytes_numba_passes(
    env_id, phases, monkeypatch
):
    """`LauncherRecorder.record_step` (the ``gpu-compile`` table's launches per step): its byte
    count per launch equals numba-cuda's own parameter list for the same values, 8 bytes each."""
    from kernelgym.core.gpu_compile import LauncherRecorder, format_step_launches
    from kernelgym.envs.testing.gpu_compile import run_env_workloads

    # the table's configuration (the default, params compiled in): passed as arguments, a bool
    # param is a 1-byte kernel parameter, and the 8-byte slots no longer add up to the bytes
    monkeypatch.setenv("KERNELGYM_PARAMS", "constants")

    recorder = LauncherRecorder()
    run_env_workloads(recorder, env_id, steps=1)
    label = next(label for label in recorder.steps if label.startswith(f"{env_id} next_step"))  # precision after
    assert recorder.steps[label][0] == phases and len(recorder.steps[label][1]) == 1  # the phases fused
    env = kge.make(env_id, 4, backend="cpu", seed=0)
    prebuilt, _, _ = stubbed_step(env)
    assert [size for _, size in recorder.steps[label][1]] == [8 * launch.num_parameters for launch in prebuilt]
    assert f"| {label} | {phases} | 1 |" in format_step_launches(recorder.steps)
    env.close()
