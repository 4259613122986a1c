"""CartPole env-steps per second: kernelgym (cpu backend) against gymnasium and EnvPool.

Side by side in one run, at each batch size N:

- kernelgym ``make("CartPole-v1", N, backend="cpu")``, actions handed in as a torch
  tensor every step (outputs are torch tensors);
- gymnasium's numpy ``CartPoleVectorEnv`` (``make_vec(..., "vector_entry_point")``);
- gymnasium's ``SyncVectorEnv`` of N ``CartPoleEnv`` (fewer steps: it is slow);
- EnvPool's C++ CartPole (``envpool.make_gymnasium``) when ``--envpool-python`` names a
  Python that has envpool (EnvPool wants its own venv; it is run as a subprocess).

Every env gets random actions, pre-made before timing. Each number is the median of
``--repeats`` timed runs after a warm-up. Writes benchmarks/results/envs.md and prints it.

    .venv/bin/python benchmarks/bench_envs.py --envpool-python .venv-envpool/bin/python
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results" / "envs.md"
ACTION_BATCHES = 8  # distinct pre-made action batches, cycled

ENVPOOL_SCRIPT = r"""
import json, statistics, sys, time
import numpy as np
import envpool
n, steps, repeats, threads = (int(v) for v in sys.argv[1:5])
env = envpool.make_gymnasium("CartPole-v1", num_envs=n, batch_size=n, num_threads=threads, seed=0)
env.reset()
actions = [np.random.default_rng(k).integers(0, 2, n).astype(np.int32) for k in range(8)]
def run():
    for k in range(steps):
        env.step(actions[k % 8])
run()
rates = []
for _ in range(repeats):
    start = time.perf_counter(); run(); rates.append(n * steps / (time.perf_counter() - start))
print(json.dumps({"rate": statistics.median(rates), "version": envpool.__version__}))
"""


def median_rate(run, env_steps: int, repeats: int) -> float:
    """Median env-steps per second over ``repeats`` timed runs, after one warm-up run."""
    run()
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        rates.append(env_steps / (time.perf_counter() - start))
    return statistics.median(rates)


def bench_kernelgym(n: int, steps: int, repeats: int, threads: int) -> float:
    import numba
    import torch

    import kernelgym.envs as kge

    numba.set_num_threads(threads)

    env = kge.make("CartPole-v1", n, backend="cpu", seed=0)
    env.reset()
    generator = torch.Generator().manual_seed(0)
    actions = [torch.randint(0, 2, (n,), generator=generator) for _ in range(ACTION_BATCHES)]

    def run():
        for k in range(steps):
            env.step(actions[k % ACTION_BATCHES])

    return median_rate(run, n * steps, repeats)


def bench_gymnasium(n: int, steps: int, repeats: int, mode: str) -> float:
    import gymnasium

    env = gymnasium.make_vec("CartPole-v1", num_envs=n, vectorization_mode=mode)
    env.reset(seed=0)
    generator = np.random.default_rng(0)
    actions = [generator.integers(0, 2, n) for _ in range(ACTION_BATCHES)]

    def run():
        for k in range(steps):
            env.step(actions[k % ACTION_BATCHES])

    rate = median_rate(run, n * steps, repeats)
    env.close()
    return rate


def bench_envpool(python: str, n: int, steps: int, repeats: int, threads: int):
    result = subprocess.run(
        [python, "-c", ENVPOOL_SCRIPT, str(n), str(steps), str(repeats), str(threads)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if result.returncode != 0:
        return None, result.stderr.strip().splitlines()[-1] if result.stderr else "failed"
    payload = json.loads(result.stdout.strip().splitlines()[-1])
    return payload["rate"], payload["version"]


def steps_for(n: int, budget: int) -> int:
    """Steps per timed run so that each run covers about ``budget`` env-steps."""
    return max(10, budget // n)


def main(argv=None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096, 65536])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--budget", type=int, default=4_000_000, help="env-steps per timed run (fast envs)")
    parser.add_argument("--sync-budget", type=int, default=100_000, help="env-steps per timed run (SyncVectorEnv)")
    parser.add_argument("--envpool-python", default=None, help="a Python with envpool installed")
    parser.add_argument("--envpool-threads", type=int, default=os.cpu_count())
    parser.add_argument(
        "--numba-threads",
        type=int,
        nargs="+",
        default=None,
        help="kernelgym thread counts to measure (default: 1 and all cores)",
    )
    args = parser.parse_args(argv)

    import numba

    thread_counts = args.numba_threads or sorted({1, numba.config.NUMBA_NUM_THREADS})
    load_start = os.getloadavg()[0]
    rows = []
    envpool_version = None
    for n in args.sizes:
        steps = steps_for(n, args.budget)
        ours_by_threads = {threads: bench_kernelgym(n, steps, args.repeats, threads) for threads in thread_counts}
        ours = max(ours_by_threads.values())
        vector = bench_gymnasium(n, steps, args.repeats, "vector_entry_point")
        sync = bench_gymnasium(n, steps_for(n, args.sync_budget), max(3, args.repeats // 2), "sync")
        envpool_rate = None
        if args.envpool_python:
            envpool_rate, envpool_version = bench_envpool(
                args.envpool_python, n, steps, args.repeats, args.envpool_threads
            )
        rows.append((n, ours_by_threads, vector, sync, envpool_rate))
        print(
            f"N={n}: kernelgym {ours / 1e6:.2f} M/s (best of threads {thread_counts}), "
            f"CartPoleVectorEnv {vector / 1e6:.2f} M/s, "
            f"SyncVectorEnv {sync / 1e6:.3f} M/s, EnvPool "
            f"{'-' if envpool_rate is None else f'{envpool_rate / 1e6:.3f} M/s'}",
            file=sys.stderr,
        )
    load_end = os.getloadavg()[0]

    def ratio(a, b):
        return "-" if b is None else f"{a / b:.1f}x"

    def rate(value):
        return "-" if value is None else f"{value / 1e6:.3f}"

    versions = ", ".join(
        f"{name} {importlib.metadata.version(name)}" for name in ("numba", "numpy", "torch", "gymnasium")
    )
    envpool_note = (
        f"EnvPool {envpool_version}, {args.envpool_threads} threads, batch_size = N (synchronous)"
        if args.envpool_python and envpool_rate is not None
        else f"EnvPool: not measured ({envpool_version or 'no --envpool-python given'})"
    )
    lines = [
        "## kernelgym-envs: CartPole-v1 env-steps/s (cpu backend)",
        "",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, {platform.system()}, "
        f"load average {load_start:.1f} at start and {load_end:.1f} at end (shared machine)",
        f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- versions: Python {platform.python_version()}, {versions}; numba threading layer "
        f"{numba.threading_layer()}; kernelgym measured with {thread_counts} numba threads",
        f"- {envpool_note}",
        f"- medians of {args.repeats} timed runs of ~{args.budget:,} env-steps each (SyncVectorEnv: "
        f"~{args.sync_budget:,}), random actions; kernelgym takes a torch tensor of actions per step",
        "- command: `" + " ".join([".venv/bin/python", "benchmarks/bench_envs.py", *sys.argv[1:]]) + "`",
        "",
        "M env-steps/s (ratios: kernelgym's best thread count against the others)",
        "",
        "| N | "
        + " | ".join(f"kernelgym {t} thread{'s' if t > 1 else ''}" for t in thread_counts)
        + " | gymnasium CartPoleVectorEnv | SyncVectorEnv | EnvPool "
        "| vs CartPoleVectorEnv | vs SyncVectorEnv | vs EnvPool |",
        "|---|" + "---|" * (len(thread_counts) + 6),
    ]
    for n, ours_by_threads, vector, sync, envpool_rate in rows:
        ours = max(ours_by_threads.values())
        lines.append(
            f"| {n} | "
            + " | ".join(rate(ours_by_threads[t]) for t in thread_counts)
            + f" | {rate(vector)} | {rate(sync)} | {rate(envpool_rate)} "
            f"| {ratio(ours, vector)} | {ratio(ours, sync)} | {ratio(ours, envpool_rate)} |"
        )
    text = "\n".join(lines) + "\n"
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text)
    print(text)
    return text


if __name__ == "__main__":
    main()
