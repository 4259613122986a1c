"""Throughput of kernelgym.core's building blocks on the cpu backend (a script, not a test).

    .venv/bin/python benchmarks/bench_core.py [--num-envs 65536] [--repeats 7]

Writes benchmarks/results/core.md (machine, date, versions, medians of repeats, ratios)
and prints it.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import time
from pathlib import Path

import numba
import numpy as np

from kernelgym.core import CUDADataManager, DataFeed, FunctionManager, env_kernel, rng


@env_kernel
def tick(i, timestep):
    timestep[i] += 1


@env_kernel
def draw_uniforms(i, states, out):
    for j in range(out.shape[1]):
        out[i, j] = rng.uniform(states, i)


def median_seconds(run, repeats: int, inner: int = 1) -> float:
    """Median over ``repeats`` of the time of ``inner`` calls, per call."""
    run()  # compile or load from the cache first
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            run()
        times.append((time.perf_counter() - start) / inner)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--num-envs", type=int, default=65536)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--output", default=str(Path(__file__).resolve().parents[1] / "benchmarks/results/core.md"))
    options = parser.parse_args()
    n, repeats = options.num_envs, options.repeats
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")  # reported as "at start"
    rows = []

    # launch overhead: one env, a trivial body
    one = np.zeros(1, np.int32)
    dm = CUDADataManager(num_envs=1, backend="cpu")
    fm = FunctionManager(dm)
    fm.register("tick", tick)
    bound = fm.bind("tick", "_timestep_")
    checked = median_seconds(lambda: tick.launch("cpu", 1, one), repeats, 2000)
    fast = median_seconds(bound, repeats, 2000)
    rows.append(('launch overhead, `k.launch("cpu", 1, x)` (checks arguments)', f"{checked * 1e6:.1f} us", ""))
    rows.append(("launch overhead, `FunctionManager.bind(...)()`", f"{fast * 1e6:.1f} us", ""))

    # device-side reset of done envs vs the numpy equivalent
    generator = np.random.default_rng(0)
    arrays = {
        "obs": generator.normal(size=(n, 4)).astype(np.float32),
        "count": np.arange(n, dtype=np.int64),
        "agents": generator.normal(size=(n, 10, 3)),
    }
    dm = CUDADataManager(num_envs=n, episode_length=10, backend="cpu")
    feed = DataFeed()
    for name, values in arrays.items():
        feed.add_data(name, values, save_copy_and_apply_at_reset=True, log_data_across_episode=(name == "obs"))
    dm.push_data_to_device(feed)
    done_mask = (generator.random(n) < 0.1).astype(np.int32)
    done = dm.device_data("_done_")

    def reset_kernel():
        done[:] = done_mask
        dm.reset_done_envs()

    live = {name: dm.device_data(name) for name in arrays}
    saved = {name: dm.device_data(name + "_at_reset") for name in arrays}
    timestep = dm.device_data("_timestep_")

    def reset_numpy():
        done[:] = done_mask
        mask = done.astype(bool)
        for name in arrays:
            live[name][mask] = saved[name][mask]
        timestep[mask] = 0
        done[mask] = 0

    def set_done_only():
        done[:] = done_mask

    base = median_seconds(set_done_only, repeats, 20)
    kernel_time = median_seconds(reset_kernel, repeats, 20) - base
    numpy_time = median_seconds(reset_numpy, repeats, 20) - base
    rows.append(
        (
            f"`reset_done_envs`, {n} envs, 10% done, 3 arrays (f32 (N,4), i64 (N,), f64 (N,10,3))",
            f"{kernel_time * 1e3:.3f} ms",
            f"numpy masked copy: {numpy_time * 1e3:.3f} ms ({numpy_time / kernel_time:.1f}x)",
        )
    )
    log_time = median_seconds(dm.log_step, repeats, 20)
    rows.append((f"`log_step`, {n} envs, one f32 (N,4) array", f"{log_time * 1e3:.3f} ms", ""))

    # device RNG throughput vs numpy's Generator
    states = rng.seed_streams(0, n)
    out = np.zeros((n, 64))
    kernel_rng = median_seconds(lambda: draw_uniforms.cpu(n, states, out), repeats, 5)
    numpy_generator = np.random.default_rng(0)
    numpy_rng = median_seconds(lambda: numpy_generator.random(out=out), repeats, 5)
    draws = n * 64
    rows.append(
        (
            f"`rng.uniform`, {n} streams x 64 draws",
            f"{draws / kernel_rng / 1e6:.0f} M draws/s",
            f"numpy Generator.random: {draws / numpy_rng / 1e6:.0f} M draws/s ({numpy_rng / kernel_rng:.1f}x)",
        )
    )

    threads_setting = (
        f"NUMBA_NUM_THREADS={os.environ['NUMBA_NUM_THREADS']} " if "NUMBA_NUM_THREADS" in os.environ else ""
    )
    lines = [
        "## kernelgym-core (cpu backend)",
        "",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, {platform.system()}, "
        f"load average {load:.1f} at start "
        f"(shared machine), numba threads {numba.get_num_threads()}",
        f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- versions: Python {platform.python_version()}, numpy {np.__version__}, numba {numba.__version__}",
        f"- medians of {repeats} repeats; command: `{threads_setting}.venv/bin/python benchmarks/bench_core.py`",
        "",
        "| what | median | compared with |",
        "|---|---|---|",
        *(f"| {what} | {value} | {other} |" for what, value, other in rows),
        "",
    ]
    text = "\n".join(lines)
    output = Path(options.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
