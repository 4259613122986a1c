"""``kernelgym gpu-compile``: every kernel kernelgym builds, compiled for sm_90a and sm_80.

Runs every workload on the ``cpu`` backend (core's kernels, every registered env in
both autoreset modes and every precision it declares, plugins included, kernels writing a memory's storage, the
DeviceCollector), then compiles each launcher with the argument types those launches
passed, with NVIDIA's NVVM and ptxas (no GPU needed; see
:mod:`kernelgym.core.gpu_compile`). Each build is audited: its PTX must round as the cpu
twin does (no contracted fma, no unrounded add/sub/mul, no approximate instruction outside
libdevice; :mod:`kernelgym.core.ptx_audit`), and the launch kernelgym configures for it must
fit sm_80 and sm_90 (:mod:`kernelgym.core.launch_fit`). Prints a table (kernel, target,
registers, stack, spills, float64 share, PTX audit, libdevice calls with NVIDIA's ulp
bounds, occupancy), a table of how full the agent kernels keep an SM at a few agent counts
(envs packed into blocks against one env per block), a table of the launches per env step
and the parameter bytes of each, and exits 1 on any compile error, audit
finding or launch that does not fit.
"""

from __future__ import annotations

import sys
import time

from kernelgym.core import env_kernel

__all__ = ["run_all_workloads", "run_gpu_compile"]


@env_kernel
def _write_step_into_memory(env, t, storage, values):
    """A rollout kernel writing step ``t`` of env ``env`` straight into a memory's storage."""
    for k in range(storage.shape[2]):
        storage[t, env, k] = values[env, k]


def _memory_workloads(recorder, keep_going: bool) -> None:
    import numpy as np
    import torch

    from kernelgym.core import CUDADataManager, DataFeed
    from kernelgym.memory import RandomMemory

    num_envs, memory_size = 4, 3
    values = np.arange(num_envs * 2, dtype=np.float32).reshape(num_envs, 2)
    with recorder.workload("memory get_array_by_name (kernel writes the storage)", keep_going):
        memory = RandomMemory(memory_size, num_envs, device="cpu")
        memory.create_tensor("obs", 2, dtype=torch.float32)
        _write_step_into_memory.launch("cpu", num_envs, 0, memory.get_array_by_name("obs"), values)
    with recorder.workload("memory from_data_manager (kernel writes data-manager arrays)", keep_going):
        manager = CUDADataManager(num_envs=num_envs, backend="cpu")
        feed = DataFeed()
        feed.add_data("obs_log", np.zeros((memory_size, num_envs, 2), np.float32))
        manager.push_data_to_device(feed, torch_accessible=True)
        RandomMemory.from_data_manager(manager, ["obs_log"], memory_size)
        _write_step_into_memory.launch("cpu", num_envs, np.int64(1), manager.device_data("obs_log"), values)


def _collector_workload(recorder, keep_going: bool) -> None:
    import torch

    import kernelgym.envs as kge
    from kernelgym.collectors import DeviceCollector
    from kernelgym.collectors.rollout.actor import Actor

    class PushLeft(Actor):
        def step(self, stepno, obs, act, rew, fin, *, hx=None, virtual=False):
            return torch.zeros_like(act), (), {}

    with recorder.workload("DeviceCollector CartPole-v1 same_step", keep_going):
        env = kge.make("CartPole-v1", num_envs=4, backend="cpu", seed=0, autoreset_mode="same_step")
        DeviceCollector(env, PushLeft(), 3, seed=0).collect()


def run_all_workloads(recorder, env_ids=None, keep_going: bool = True) -> None:
    """Run every workload on ``cpu`` under ``recorder`` (``env_ids``: default every registered env)."""
    import kernelgym.envs as kge
    from kernelgym.core.gpu_compile import run_core_workloads
    from kernelgym.envs.testing.gpu_compile import run_env_workloads

    run_core_workloads(recorder, keep_going)
    for env_id in env_ids or kge.list_envs():
        run_env_workloads(recorder, env_id, keep_going=keep_going)
    _memory_workloads(recorder, keep_going)
    _collector_workload(recorder, keep_going)


def run_gpu_compile(env_ids=None, verbose: bool = False) -> int:
    """Compile, audit and fit everything, print the table; 0 when every build passed, 1 otherwise, 2 without NVVM."""
    from kernelgym.core.gpu_compile import (
        TARGETS,
        GpuCompileUnavailableError,
        LauncherRecorder,
        format_agent_packing,
        format_failures,
        format_step_launches,
        format_table,
        require_toolchain,
        target_name,
    )

    try:
        require_toolchain()
    except GpuCompileUnavailableError as error:
        print(f"kernelgym gpu-compile: {error}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    recorder = LauncherRecorder()
    run_all_workloads(recorder, env_ids)
    ran = time.perf_counter() - started

    def progress(build):
        if verbose:
            status = "ok" if build.passed else "FAILED"
            print(f"  {status} {build.kernel} {build.target} ({build.seconds:.1f} s)", file=sys.stderr, flush=True)

    builds = recorder.compile(progress=progress)
    print(format_table(builds))
    print(
        "\nAgent kernels: share of an SM's thread slots running an agent, one env per block -> "
        "envs packed into blocks (kernelgym's launch)\n"
    )
    print(format_agent_packing(builds))
    print("\nLaunches per env step, and the kernel-parameter bytes each passes (one driver call each)\n")
    print(format_step_launches(recorder.steps))
    signatures = len({(build.kernel, build.signature) for build in builds})
    print(
        f"\n{signatures} kernel signatures x {len(TARGETS)} targets "
        f"({', '.join(target_name(cc) for cc in TARGETS)}): workloads on cpu {ran:.0f} s, "
        f"total {time.perf_counter() - started:.0f} s"
    )
    print(
        f"compile errors {sum(not build.ok for build in builds)}, PTX audit failures "
        f"{sum(bool(build.audit) and not build.contracted for build in builds)}, launches that do not fit "
        f"{sum(bool(build.fit) for build in builds)}, "
        f"opt-in fast-math builds {sum(build.contracted for build in builds)}"
    )
    failures = format_failures(builds, recorder.failures)
    if failures:
        print(f"\nFAILED:\n{failures}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(run_gpu_compile(sys.argv[1:] or None, verbose=True))
