"""Every benchmark configuration (bench_gpu.py's, bench_tag.py's) fits a GPU machine: each is
built (made, reset, stepped once, its kernels typed but not run) on cpu at N = 2 and 4, and
its host and device bytes are extrapolated linearly to the configured N.

Device bytes are the data manager's arrays (what a cuda build allocates on the GPU);
host bytes are the rest of what numpy allocated meanwhile (tracemalloc's peak), i.e.
what stays on the host when the buffers live on a GPU: spaces, host copies, temporaries.
"""

import tracemalloc

import numpy as np
import pytest
from scripts import load_script

HOST_LIMIT, DEVICE_LIMIT = 64 * 2**30, 70 * 2**30
GIB = 2**30


def load(name):
    return load_script(f"benchmarks/{name}.py")


def configurations():
    """(row label, env id, configured N, params) of every benchmark row (bench_gpu.py's and
    bench_tag.py's), one per env and params at the largest N asked for."""
    seen = {}
    for workload in [*load("bench_gpu").workloads(tiny=False), *load("bench_tag").workloads()]:
        seen.setdefault(
            (workload.env_id, tuple(sorted(workload.params.items()))),
            (workload.label, workload.env_id, 0, workload.params),
        )
        key = (workload.env_id, tuple(sorted(workload.params.items())))
        label, env_id, n, params = seen[key]
        seen[key] = (label, env_id, max(n, workload.num_envs), params)
    return list(seen.values())


def build(env_id, num_envs, params):
    """Make, reset and step ``env_id`` once on cpu. Its launches record their argument types
    and run nothing (`typing_cpu_launches_only`): a launch allocates nothing, and compiling
    TagContinuous's launchers only for this took minutes."""
    import torch

    import kernelgym.envs as kge
    from kernelgym.core.gpu_compile import typing_cpu_launches_only

    with typing_cpu_launches_only():
        env = kge.make(env_id, num_envs=num_envs, backend="cpu", seed=0, **params)
        env.reset(seed=0)
        env.step(torch.zeros(env.action_space.shape, dtype=torch.int64))
    return env


def measure(env_id, num_envs, params):
    """(host bytes, device bytes) of making, resetting and stepping ``env_id`` once on cpu."""
    tracemalloc.start()
    try:
        start, _ = tracemalloc.get_traced_memory()
        env = build(env_id, num_envs, params)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    manager = env.data_manager
    device = sum(manager.device_data(name).nbytes for name in manager.host_data if name not in manager.scalar_data_list)
    env.close()
    return peak - start - device, device


@pytest.mark.parametrize(
    "label, env_id, num_envs, params", configurations(), ids=lambda value: value if isinstance(value, str) else None
)
def test_every_benchmark_configuration_fits_a_gpu_machine(label, env_id, num_envs, params, monkeypatch):
    # the Tag rows differ in params only: as launcher arguments they share one program (the
    # arrays, which this measures, are the same as with params compiled in)
    monkeypatch.setenv("KERNELGYM_PARAMS", "arguments")
    # what still compiles (the helpers that pack the bound arrays, numba's own) first, untraced:
    # tracemalloc slows numba's compiler several-fold
    build(env_id, 1, params).close()
    (host2, device2), (host4, device4) = measure(env_id, 2, params), measure(env_id, 4, params)
    assert device4 > device2 > 0

    def at(n, two, four):
        per_env = (four - two) / 2
        return two + per_env * (n - 2)

    host, device = at(num_envs, host2, host4), at(num_envs, device2, device4)
    assert device <= DEVICE_LIMIT, f"{label} at N={num_envs:,}: {device / GIB:.1f} GiB of device memory"
    assert host <= HOST_LIMIT, f"{label} at N={num_envs:,}: {host / GIB:.1f} GiB of host memory"


def test_the_measure_sees_a_full_size_host_copy():
    """The measure catches what issue 26 found: gymnasium's tiled bounds grow with N."""
    from gymnasium import spaces
    from gymnasium.vector.utils import batch_space

    tracemalloc.start()
    try:
        start, _ = tracemalloc.get_traced_memory()
        space = batch_space(batch_space(spaces.Box(-np.inf, np.inf, (78,), np.float32), 1000), 4)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak - start >= space.low.nbytes + space.high.nbytes
