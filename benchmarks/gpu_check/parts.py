"""The measurements of the GPU check, one per subcommand; each prints JSON lines.

``python benchmarks/gpu_check/parts.py PART [--backend cuda|cpu] [--tiny]`` runs one part
and prints one JSON object per result line (``{"part": ..., ...}``) as soon as it is
measured, so that a part that dies later keeps what it printed. `check.py` runs every part
in its own process, with a time limit each, and collects the lines.

Timing on cuda uses CUDA events or one device synchronization per timed run, never one per
step; each rate is the median of several runs after a warm-up.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # benchmarks/: bench_step's byte count

CLASSIC = ("CartPole-v1", "Acrobot-v1", "Pendulum-v1", "MountainCar-v0")
PRECISIONS = ("float64", "float32")
WARPDRIVE_TAG_RATE = 2.9e6  # env-steps/s, TagContinuous 2,000 envs x 1,000 agents, one A100


# the commit measured, in every line (check.py sets it from git or the wheelhouse's COMMIT file)
COMMIT = os.environ.get("KERNELGYM_COMMIT", "unknown")


def emit(part: str, **fields) -> None:
    """Print one result line (JSON), with the commit, at once."""
    print(json.dumps({"part": part, "commit": COMMIT, **fields}, default=str), flush=True)


def synchronize(backend: str) -> None:
    if backend == "cuda":
        import torch

        torch.cuda.synchronize()


def timed_median(run, backend: str, repeats: int) -> float:
    """Median seconds of ``run()`` over ``repeats`` runs after one warm-up (one sync per run)."""
    run()
    synchronize(backend)
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        synchronize(backend)
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def sample_actions(env, count: int, seed: int):
    """``count`` batches of valid actions on the env's device, made before any timing."""
    import torch

    env.action_space.seed(seed)
    return [torch.as_tensor(env.action_space.sample(), device=env.device) for _ in range(count)]


def checked_env_ids() -> list[str]:
    """Every registered env id, MinAtar's games once each.

    A game's ``MinAtar-<Game>-v0`` runs its ``-v1`` kernels with one params flag changed (all
    six actions instead of the minimal set): checking both would double the compile time
    the GPU minutes go to, for no new kernel code.
    """
    import kernelgym.envs as kge

    return [env_id for env_id in kge.list_envs() if not (env_id.startswith("MinAtar-") and env_id.endswith("-v0"))]


def env_rate(env_id: str, num_envs: int, backend: str, steps: int, repeats: int, **params) -> float:
    """Env-steps/s of ``env_id``: the median of ``repeats`` runs of ``steps`` steps after a
    warm-up run, cycling through 4 batches of random actions made on the env's device beforehand."""
    import kernelgym.envs as kge

    env = kge.make(env_id, num_envs, backend=backend, seed=0, check_action_values=False, **params)
    try:
        env.reset(seed=0)
        actions = sample_actions(env, 4, 0)

        def run():
            for k in range(steps):
                env.step(actions[k % len(actions)])

        return num_envs * steps / timed_median(run, backend, repeats)
    finally:
        env.close()


# ------------------------------------------------------------------------------ parts
def part_info(backend: str, tiny: bool) -> None:
    """Versions and the device (``rounding`` checks what the device computes)."""
    import numba
    import torch

    import kernelgym.core

    versions = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": numba.__version__,
        "torch": torch.__version__,
        "kernelgym": kernelgym.core.__version__,
    }
    try:
        from importlib.metadata import version

        versions["numba-cuda"] = version("numba-cuda")
    except Exception as error:
        versions["numba-cuda"] = f"unknown ({error})"
    device = torch.cuda.get_device_name(0) if backend == "cuda" else platform.processor() or platform.machine()
    emit("info", backend=backend, device=device, cpus=os.cpu_count(), **versions)


def part_bandwidth(backend: str, tiny: bool) -> None:
    """The card's own bandwidth: a device-to-device copy, bytes read plus written."""
    import torch

    if backend != "cuda":
        source = np.ones(2**20 if tiny else 2**27, np.uint8)
        target = np.empty_like(source)
        seconds = timed_median(lambda: np.copyto(target, source), backend, 5)
        emit("bandwidth", bytes=2 * source.nbytes, GBps=2 * source.nbytes / seconds / 1e9, how="numpy copy")
        return
    source = torch.ones(2**31 if not tiny else 2**24, dtype=torch.uint8, device="cuda")
    target = torch.empty_like(source)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(3):
        target.copy_(source)
    times = []
    for _ in range(20):
        start.record()
        target.copy_(source)
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / 1e3)
    seconds = statistics.median(times)
    emit(
        "bandwidth",
        bytes=2 * source.numel(),
        GBps=2 * source.numel() / seconds / 1e9,
        how="torch device-to-device copy, CUDA events, median of 20",
    )


def part_parity(backend: str, tiny: bool) -> None:
    """cpu against ``backend`` trajectories, from the same seed with the same actions: the
    first step at which any output differs (None: bitwise equal throughout)."""
    import kernelgym.envs as kge

    num_envs, steps = (16, 20) if tiny else (1024, 1000)
    for env_id in CLASSIC[:1] if tiny else CLASSIC:
        for precision in PRECISIONS:
            started = time.perf_counter()
            envs = [kge.make(env_id, num_envs, backend=b, seed=7, precision=precision) for b in ("cpu", backend)]
            envs[0].action_space.seed(5)
            first_difference, worst = None, 0.0
            outputs = [env.reset(seed=7)[0] for env in envs]
            if not np.array_equal(outputs[0].cpu().numpy(), outputs[1].cpu().numpy()):
                first_difference = 0
            for step in range(1, steps + 1):
                actions = envs[0].action_space.sample()
                results = [env.step(_on(env, actions)) for env in envs]
                for a, b in zip(results[0][:4], results[1][:4]):
                    a, b = a.cpu().numpy(), b.cpu().numpy()
                    if not np.array_equal(a, b, equal_nan=True):
                        if first_difference is None:
                            first_difference = step
                        worst = max(worst, float(np.nanmax(np.abs(a.astype(np.float64) - b.astype(np.float64)))))
            emit(
                "parity",
                env=env_id,
                precision=precision,
                envs=num_envs,
                steps=steps,
                first_differing_step=first_difference,
                max_abs_difference=worst,
                ok=first_difference is None,
                seconds=round(time.perf_counter() - started, 1),
            )
            for env in envs:
                env.close()


def part_launch_parity(backend: str, tiny: bool) -> None:
    """numba-cuda's launch against the prebuilt one (`kernelgym.core.prebuilt_launch`), same seed
    and actions: the first step at which any output differs (None: bitwise equal), and the
    launch path each env's step launches took (a fallback shows here)."""
    import kernelgym.envs as kge
    from kernelgym.core.prebuilt_launch import launch_path

    num_envs, steps = (8, 10) if tiny else (512, 200)
    workloads = [(env_id, {}) for env_id in CLASSIC]
    workloads += [("TagGridWorld-v0", {}), ("TagContinuous-v0", {"num_runners": 20})]
    for env_id, params in workloads[:1] if tiny else workloads:
        envs, taken = [], []
        for path in ("numba", "prebuilt"):
            os.environ["KERNELGYM_LAUNCH"] = path  # read when the env binds
            env = kge.make(env_id, num_envs, backend=backend, seed=3, **params)
            envs.append(env)
            taken.append("+".join(sorted({launch_path(launch) for launch in env._step_launch.launches})))
        os.environ.pop("KERNELGYM_LAUNCH")
        outputs = [env.reset(seed=3)[0] for env in envs]
        first_difference = None if _equal(*outputs) else 0
        envs[0].action_space.seed(11)
        for step in range(1, steps + 1):
            actions = envs[0].action_space.sample()
            results = [env.step(_on(env, actions))[:4] for env in envs]
            if first_difference is None and not all(_equal(a, b) for a, b in zip(*results)):
                first_difference = step
        emit(
            "launch_parity",
            env=env_id,
            envs=num_envs,
            steps=steps,
            numba_env_took=taken[0],
            prebuilt_env_took=taken[1],
            first_differing_step=first_difference,
            ok=first_difference is None and (backend != "cuda" or taken == ["numba", "prebuilt"]),
        )
        for env in envs:
            env.close()


def part_fragments(backend: str, tiny: bool) -> None:
    """Host time per step of captured 16-step fragments against eager ones (fragments.py)."""
    import fragments

    fragments.part_fragments(backend, tiny)


def part_tag_baseline(backend: str, tiny: bool) -> None:
    """TagGridWorld (partial observation) against the hand-written CUDA C kernel (tag_baseline.py)."""
    import tag_baseline

    tag_baseline.part_tag_baseline(backend, tiny)


def _equal(a, b) -> bool:
    return np.array_equal(a.cpu().numpy(), b.cpu().numpy(), equal_nan=True)


def part_launch_paths(backend: str, tiny: bool) -> None:
    """Host microseconds per CartPole step by launch path, check on and off (bench_launch.py):
    real steps on cuda, the stubbed host path on cpu."""
    import bench_launch

    sizes = (64,) if tiny else bench_launch.SIZES
    repeats, calls = (2, 20) if tiny else (5, 1000)
    rows = bench_launch.cuda_rows if backend == "cuda" else bench_launch.stubbed_rows
    for row in rows(sizes, repeats, calls):
        emit("launch_paths", backend=backend, **row)


def _on(env, actions):
    import torch

    return torch.as_tensor(actions, device=env.device)


def part_sync(backend: str, tiny: bool) -> None:
    """Host synchronizations per step() and per DeviceCollector fragment, counted by torch's
    sync debug mode around the hot loop (default check mode)."""
    import torch

    import kernelgym.envs as kge

    if backend != "cuda":
        emit("sync", skipped="torch's sync debug mode counts CUDA synchronizations only")
        return
    num_envs, registered = 256, set(kge.list_envs())
    for label, env_id, params in sync_workloads(num_envs):
        if env_id not in registered:  # a plugin this install lacks
            emit("sync", workload=f"{label}.step()", skipped=f"{env_id} is not registered")
            continue
        env = kge.make(env_id, num_envs, backend=backend, seed=0, **params)
        env.reset(seed=0)
        actions = sample_actions(env, 4, 0)
        for k in range(4):
            env.step(actions[k])  # warm-up: compile, first-call setup
        torch.cuda.synchronize()
        steps = 50
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                for k in range(steps):
                    env.step(actions[k % 4])
            finally:
                torch.cuda.set_sync_debug_mode("default")
        syncs = _sync_warnings(caught)
        error = None
        torch.cuda.set_sync_debug_mode("error")
        try:
            for k in range(steps):
                env.step(actions[k % 4])
        except RuntimeError as raised:
            error = str(raised).splitlines()[0]
        finally:
            torch.cuda.set_sync_debug_mode("default")
        emit(
            "sync",
            workload=f"{label}.step()",
            check_action_values=env.check_action_values,
            steps=steps,
            syncs=len(syncs),
            syncs_per_step=len(syncs) / steps,
            error_mode=error or "no error",
            first=syncs[:1],
            ok=not syncs and error is None,
        )
        env.close()
    _collector_sync()


def sync_workloads(num_envs: int) -> list[tuple[str, str, dict]]:
    """(label, env id, make params) of each env whose ``step()`` `part_sync` counts: the
    classic and Tag envs, and each path of the env contract that launches differently: a Dict
    observation, per-env params that differ and are drawn at every reset, Tag envs packed
    several to a block, a MinAtar game (bool observations, helper functions not inlined)."""
    lengths = np.linspace(0.4, 0.6, num_envs)
    return [
        ("CartPole-v1", "CartPole-v1", {}),
        ("Acrobot-v1", "Acrobot-v1", {}),
        ("TagContinuous-v0", "TagContinuous-v0", {}),
        ("TagGridWorld-v0", "TagGridWorld-v0", {}),
        ("GridGoal-v0 (Dict observation)", "GridGoal-v0", {}),
        (
            "CartPole-v1 (per-env length, masspole drawn at reset)",
            "CartPole-v1",
            {"length": lengths, "randomize": {"masspole": (0.05, 0.15)}},
        ),
        ("TagContinuous-v0 (11 agents, 11 envs a block)", "TagContinuous-v0", {"num_taggers": 1, "num_runners": 10}),
        ("MinAtar-Seaquest-v1", "MinAtar-Seaquest-v1", {}),
    ]


def _sync_warnings(caught) -> list[str]:
    """The synchronizations torch's "warn" mode reported (not its one-time prototype notice)."""
    messages = [str(warning.message) for warning in caught]
    return [text for text in messages if "synchroniz" in text.lower() and "prototype feature" not in text]


def _collector_sync() -> None:
    import torch

    from kernelgym.collectors import DeviceCollector

    env, collector = cartpole_collector(4096, 16)
    with torch.no_grad():
        collector.collect()
        torch.cuda.synchronize()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                for _ in range(5):
                    collector.collect()
            finally:
                torch.cuda.set_sync_debug_mode("default")
    syncs = _sync_warnings(caught)
    emit(
        "sync",
        workload="DeviceCollector.collect() (16 steps)",
        fragments=5,
        syncs=len(syncs),
        syncs_per_fragment=len(syncs) / 5,
        first=syncs[:1],
        ok=len(syncs) <= 5,
    )
    del DeviceCollector
    env.close()


def cartpole_collector(num_envs: int, n_steps: int, backend: str = "cuda"):
    """A CartPole env (same-step autoreset) and a `DeviceCollector` with a 4-32-2 MLP actor
    that acts by argmax (no sampling op that could synchronize)."""
    import torch

    import kernelgym.envs as kge
    from kernelgym.collectors import DeviceCollector
    from kernelgym.collectors.rollout.actor import Actor

    class MLPActor(Actor):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.Tanh(), torch.nn.Linear(32, 2))

        def step(self, stepno, obs, act, rew, fin, *, hx=None, virtual=False):
            return self.net(obs).argmax(-1), (), {}

    env = kge.make("CartPole-v1", num_envs=num_envs, backend=backend, seed=0, autoreset_mode="same_step")
    return env, DeviceCollector(env, MLPActor().to(env.device), n_steps, seed=0)


def part_cartpole(backend: str, tiny: bool) -> None:
    """CartPole env-steps/s at N = 2^12 .. 2^24, and bytes moved against the bandwidth."""
    from bench_step import BYTES_PER_ENV_STEP

    exponents = (6, 8) if tiny else range(12, 25)
    for exponent in exponents:
        num_envs = 2**exponent
        steps = 5 if tiny else max(20, min(2000, 2**26 // num_envs))
        rate = env_rate("CartPole-v1", num_envs, backend, steps, 3 if tiny else 5)
        emit(
            "cartpole",
            envs=num_envs,
            steps=steps,
            env_steps_per_s=rate,
            bytes_per_env_step=BYTES_PER_ENV_STEP,
            GBps_moved=rate * BYTES_PER_ENV_STEP / 1e9,
        )


def part_launch(backend: str, tiny: bool) -> None:
    """Host time of one step() at small N, then the same step plus a policy forward captured
    in a CUDA graph and replayed."""
    import kernelgym.envs as kge

    for num_envs in (64, 1024):
        env = kge.make("CartPole-v1", num_envs, backend=backend, seed=0)
        obs, _ = env.reset(seed=0)
        actions = sample_actions(env, 4, 0)
        steps = 20 if tiny else 2000
        for k in range(10):
            env.step(actions[k % 4])
        synchronize(backend)
        start = time.perf_counter()
        for k in range(steps):
            env.step(actions[k % 4])
        host = (time.perf_counter() - start) / steps
        synchronize(backend)
        total = (time.perf_counter() - start) / steps
        emit(
            "launch",
            envs=num_envs,
            host_us_per_step=host * 1e6,
            us_per_step_with_final_sync=total * 1e6,
            check_action_values=env.check_action_values,
        )
        if backend == "cuda":
            _graph_replay(env, num_envs, steps)
        env.close()


def _graph_replay(env, num_envs: int, steps: int) -> None:
    import torch

    policy = torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.Tanh(), torch.nn.Linear(64, 2)).cuda()
    try:
        try:
            from kernelgym.envs.cuda_graph import capture_step  # the recipe, where present
        except ImportError:
            capture_step = None
        with torch.no_grad():
            if capture_step is not None:
                obs, _ = env.reset(seed=0)
                replay = capture_step(env, lambda obs: policy(obs).argmax(-1), obs).replay
            else:
                replay = _capture_by_hand(env, policy)
            for _ in range(10):
                replay()
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(steps):
                replay()
            torch.cuda.synchronize()
        seconds = (time.perf_counter() - start) / steps
        if hasattr(env, "check_actions"):
            env.check_actions()
        emit(
            "graph",
            envs=num_envs,
            us_per_replay=seconds * 1e6,
            recipe="kernelgym.envs.cuda_graph" if capture_step is not None else "torch.cuda.graph by hand",
            ok=True,
        )
    except Exception as error:
        emit("graph", envs=num_envs, ok=False, error=f"{type(error).__name__}: {error}"[:400])


def _capture_by_hand(env, policy):
    import torch

    obs = env.step(torch.zeros(env.num_envs, dtype=torch.int64, device="cuda"))[0]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            env.step(policy(obs).argmax(-1))
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        env.step(policy(obs).argmax(-1))
    return graph.replay


def tag_workloads(tiny: bool) -> list[tuple]:
    """``(workload, one env per block)`` of each Tag row `part_tag` measures.

    At WarpDrive's scale (2,000 envs x 1,000 agents): bench_tag.py's rows (K = 2 and 10
    nearest, all pairs and grid; TagGridWorld observing all) and TagContinuous observing all.
    Then small agent counts, packed several envs to a block (issue 26), each also launched
    one env per block, as before packing, for the ratio.
    """
    from bench_tag import Workload, workloads

    if tiny:
        scale, packed_envs = [w for w in workloads([4]) if "K=2, grid" in w.label], 64
    else:
        full = {"num_taggers": 1, "num_runners": 999}
        scale = [Workload("TagContinuous-v0, full observation", "TagContinuous-v0", 2_000, 1_000, full)]
        scale += workloads([2_000])
        packed_envs = 2**15
    rows = [(workload, False) for workload in scale]
    for runners in (10, 3):
        params = {"num_taggers": 1, "num_runners": runners}
        label = f"TagContinuous-v0, {runners + 1} agents"
        workload = Workload(label, "TagContinuous-v0", packed_envs, runners + 1, params)
        rows += [(workload, False), (workload, True)]
    return rows


@contextlib.contextmanager
def one_env_per_block():
    """Agent kernels bound inside launch one env per block, the launch shape before issue
    26's packing (WarpDrive's): the baseline of the packed rows. The generated launchers
    read the envs per block from the block size, so the same code runs either way."""
    from kernelgym.core import kernels

    packed = kernels.agent_grid
    kernels.agent_grid = lambda num_envs, num_agents: (num_envs, min(num_agents, kernels.MAX_AGENT_THREADS))
    try:
        yield
    finally:
        kernels.agent_grid = packed


def part_tag(backend: str, tiny: bool) -> None:
    """Tag env-steps/s at WarpDrive's scale (2,000 envs x 1,000 agents) in every configuration
    that fits the device's free memory, and small agent counts packed against one env per block."""
    import torch
    from bench_tag import available_bytes, buffer_bytes

    for workload, unpacked in tag_workloads(tiny):
        row = {
            "configuration": workload.label + (", one env per block" if unpacked else ""),
            "envs": workload.num_envs,
            "agents": workload.num_agents,
        }
        _release_device_memory(backend)
        free = torch.cuda.mem_get_info()[0] if backend == "cuda" else available_bytes()
        needed = buffer_bytes(workload)
        if needed > 0.85 * free:  # the observations, with room for the state and the actions
            error = f"its observations need {needed / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free"
            emit("tag", **row, measured=False, error=error)
            continue
        steps = 3 if tiny else (10 if workload.num_agents >= 1_000 else 50)
        try:
            with one_env_per_block() if unpacked else contextlib.nullcontext():
                rate = env_rate(workload.env_id, workload.num_envs, backend, steps, 3, **workload.params)
        except (MemoryError, ValueError, RuntimeError) as error:
            emit("tag", **row, measured=False, error=f"{type(error).__name__}: {error}"[:300])
            continue
        if workload.num_agents >= 1_000:
            row["vs_warpdrive_a100"] = rate / WARPDRIVE_TAG_RATE
        emit("tag", **row, measured=True, env_steps_per_s=rate)


def _release_device_memory(backend: str) -> None:
    """Free what closed envs held (numba defers its frees; torch caches), before measuring what is free."""
    import gc

    gc.collect()
    if backend == "cuda":
        import torch
        from numba import cuda

        cuda.current_context().deallocations.clear()
        torch.cuda.empty_cache()


def part_collector(backend: str, tiny: bool) -> None:
    """DeviceCollector end to end: CartPole, an MLP actor, fragments of 16 steps."""
    import torch

    num_envs, n_steps = (64, 4) if tiny else (2**16, 16)
    env, collector = cartpole_collector(num_envs, n_steps, backend)
    with torch.no_grad():
        seconds = timed_median(collector.collect, backend, 3 if tiny else 7)
    emit("collector", envs=num_envs, n_steps=n_steps, env_steps_per_s=num_envs * n_steps / seconds)
    env.close()


def part_kit(backend: str, tiny: bool) -> None:
    """The property-test kit's checks on ``backend`` for every checked env (`checked_env_ids`:
    the example plugin's and MinAtar's too), classic envs in both precisions; one process per
    env and precision."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    import kernelgym.envs as kge

    tasks = [
        (env_id, precision)
        for env_id in checked_env_ids()
        for precision in (getattr(kge.get_spec(env_id), "precisions", None) or (None,))
    ]
    if tiny:  # the code path: the example plugin and one classic env
        tasks = [task for task in tasks if task in (("GoRight-v0", None), ("CartPole-v1", "float32"))]
    jobs = max(1, min(len(tasks), int(os.environ.get("GPU_CHECK_JOBS", "1"))))
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {
            pool.submit(_kit_one, env_id, precision, backend, tiny): (env_id, precision) for env_id, precision in tasks
        }
        for future in as_completed(futures):
            env_id, precision = futures[future]
            try:
                emit("kit", **future.result())
            except Exception as error:
                emit("kit", env=env_id, precision=precision, ok=False, error=f"{type(error).__name__}: {error}"[:600])


def _kit_one(env_id: str, precision, backend: str, tiny: bool) -> dict:
    from kernelgym.envs.testing import check_env
    from kernelgym.envs.testing.report import format_report

    started = time.perf_counter()
    report = check_env(env_id, backend=backend, max_examples=2 if tiny else 5, precision=precision)
    failed = [result.name for result in report.failures]
    return dict(
        env=env_id,
        precision=precision,
        ok=report.passed,
        failed=failed,
        checks=len(report.results),
        seconds=round(time.perf_counter() - started, 1),
        report=format_report(report)[-1500:] if failed else "",
    )


def part_short_run(backend: str, tiny: bool) -> None:
    """A short run of every env (what compute-sanitizer watches): make, reset, 5 steps."""
    import kernelgym.envs as kge

    for env_id in ("CartPole-v1", "TagGridWorld-v0") if tiny else checked_env_ids():
        env = kge.make(env_id, 32, backend=backend, seed=0)
        env.reset(seed=0)
        for actions in sample_actions(env, 5, 0):
            env.step(actions)
        synchronize(backend)
        emit("short_run", env=env_id, ok=True)
        env.close()
    if backend == "cuda":
        env, collector = cartpole_collector(64, 4)
        import torch

        with torch.no_grad():
            collector.collect()
        torch.cuda.synchronize()
        emit("short_run", env="DeviceCollector CartPole-v1", ok=True)


def part_rounding(backend: str, tiny: bool) -> None:
    """Where cpu and cuda round differently: an affine kernel and float32 uniform draws, each
    backend against numpy's two roundings, and fma counts in the PTX and the cpu assembly."""
    import re

    from kernelgym.core import bind, env_kernel, gpu_compile, rng
    from kernelgym.core.arrays import to_backend

    @env_kernel
    def affine_rows(i, x, out, scale, shift):
        for j in range(x.shape[1]):
            out[i, j] = x[i, j] * scale + shift

    @env_kernel
    def draw_float32(i, states, out, low, high):
        for j in range(out.shape[1]):
            out[i, j] = rng.uniform_range_as(states, i, low, high, np.float32)

    x = np.random.default_rng(0).normal(size=(10_000, 3))
    numpy_result = x * 1.5 + (-2.0)  # numpy rounds the product, then the sum
    results = {}
    for how in ("launch", "bind"):
        for where in ("cpu", backend):
            out = np.zeros_like(x) if where == "cpu" else to_backend(np.zeros_like(x), where)
            source = x if where == "cpu" else to_backend(x, where)
            if how == "launch":
                affine_rows.launch(where, x.shape[0], source, out, 1.5, -2.0)
            else:
                bind(
                    affine_rows,
                    {"x": source, "out": out, "scale": 1.5, "shift": -2.0},
                    backend=where,
                    num_envs=x.shape[0],
                )()
            got = out if where == "cpu" else out.copy_to_host()
            results[(how, where)] = got
            emit(
                "rounding",
                kernel=f"affine via {how}",
                backend=where,
                differs_from_numpy=int(np.sum(got != numpy_result)),
                of=got.size,
            )
    states = rng.seed_streams(3, 4096)
    low, high = np.float32(-0.05), np.float32(0.05)
    draws = {}
    for where in ("cpu", backend):
        out = np.zeros((4096, 4), np.float32)
        if where == "cpu":
            draw_float32.launch("cpu", 4096, states.copy(), out, low, high)
        else:
            device_out = to_backend(out, where)
            draw_float32.launch(where, 4096, to_backend(states.copy(), where), device_out, low, high)
            out = device_out.copy_to_host()
        draws[where] = out
    emit(
        "rounding",
        kernel="uniform_range_as float32",
        differs_cpu_vs_backend=int(np.sum(draws["cpu"] != draws[backend])),
        of=draws["cpu"].size,
        first=[(float(a), float(b)) for a, b in zip(draws["cpu"].ravel(), draws[backend].ravel()) if a != b][:3],
    )
    _compare_sines(backend)
    for kernel in (affine_rows, draw_float32):
        module = kernel._module(4)
        cpu_asm = "\n".join(module.cpu_launcher.inspect_asm().values())
        # the PTX alone can hide a contraction: nvJitLink's LTO code generation fuses on its own
        entry = {
            "kernel": kernel.__qualname__,
            "cpu_vfmadd": len(re.findall(r"vfmadd|vfnmadd|vfmsub", cpu_asm)),
            "lto": module.cuda_launcher.targetoptions.get("lto"),
        }
        if backend == "cuda":
            ptx = "\n".join(module.cuda_launcher.inspect_asm().values())
            entry["ptx_fma"] = ptx.count("fma.rn")
        emit("rounding", **entry)
    if backend == "cuda":
        for name, module in sorted(gpu_compile.imported_launchers().items()):
            ptx = "\n".join(module.cuda_launcher.inspect_asm().values())
            cpu_asm = "\n".join(module.cpu_launcher.inspect_asm().values())
            emit(
                "rounding",
                module=name[-60:],
                ptx_fma=ptx.count("fma.rn"),
                cpu_vfmadd=len(re.findall(r"vfmadd|vfnmadd|vfmsub", cpu_asm)),
            )


def _compare_sines(backend: str) -> None:
    """sin and cos on cpu against the backend, the math library's and `portable_math`'s, in
    float64 and float32: the library's may differ (libdevice is not glibc), portable ones must not."""
    import math

    from kernelgym.core import env_kernel
    from kernelgym.core.arrays import to_backend
    from kernelgym.core.portable_math import sincos

    @env_kernel
    def library_sines(i, x, out):
        out[i, 0] = math.sin(x[i])
        out[i, 1] = math.cos(x[i])

    @env_kernel
    def portable_sines(i, x, out):
        out[i, 0], out[i, 1] = sincos(x[i])

    for dtype in (np.float64, np.float32):
        x = np.random.default_rng(1).uniform(-20.0, 20.0, 30_000).astype(dtype)
        for kernel in (library_sines, portable_sines):
            results = {}
            for where in ("cpu", backend):
                out = np.zeros((x.size, 2), dtype)
                if where == "cpu":
                    kernel.launch("cpu", x.size, x, out)
                else:
                    device_out = to_backend(out, where)
                    kernel.launch(where, x.size, to_backend(x, where), device_out)
                    out = device_out.copy_to_host()
                results[where] = out
            emit(
                "rounding",
                kernel=f"{kernel.__qualname__.split('.')[-1]} {np.dtype(dtype).name}",
                differs_cpu_vs_backend=int(np.sum(results["cpu"] != results[backend])),
                of=results["cpu"].size,
            )


PARTS = {name[len("part_") :]: function for name, function in globals().items() if name.startswith("part_")}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=sorted(PARTS))
    parser.add_argument("--backend", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--tiny", action="store_true", help="tiny sizes: check the code path")
    options = parser.parse_args(argv)
    PARTS[options.part](options.backend, options.tiny)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
