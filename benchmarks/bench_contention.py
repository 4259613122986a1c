"""CartPole on the cpu backend beside busy processes: one thread, all threads, the default.

For each batch size N and each count of busy-loop processes (started here, one
``while True: pass`` each), three envs made with ``KERNELGYM_CPU_THREADS`` set to
``one`` (the serial twin), ``all`` (numba's thread team at every launch: the default
before issue 35) and the default (``adaptive``) are stepped in turn, interleaved
``--repeats`` times; each figure is the median env-steps/s. Each env first steps for
``--warmup`` seconds under the new load (the adaptive launch learns it there, as a
training run would in its first seconds). The 1-minute load average (``uptime``) is
printed with every row: on a shared machine, only ratios within a row mean much.

    .venv/bin/python benchmarks/bench_contention.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np

STRATEGIES = ("one", "all", "adaptive")
ACTION_BATCHES = 4


def make(n: int, strategy: str):
    """CartPole-v1 with ``n`` envs whose launches were bound under ``strategy``."""
    import kernelgym.envs as kge

    os.environ["KERNELGYM_CPU_THREADS"] = strategy  # read when make() binds the launches
    env = kge.make("CartPole-v1", n, backend="cpu", seed=0)
    env.reset()
    return env


def run_for(env, actions, steps: int) -> float:
    """Step ``steps`` times; env-steps per second."""
    start = time.perf_counter()
    for k in range(steps):
        env.step(actions[k % ACTION_BATCHES])
    return steps * env.num_envs / (time.perf_counter() - start)


def warm(env, actions, seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        run_for(env, actions, 10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, nargs="+", default=[1_024, 4_096, 65_536])
    parser.add_argument("--busy", type=int, nargs="+", default=[0, 1, 2, 4], help="busy-loop process counts")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=0.4, help="about this long per timed repeat")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds each env steps under a new load first")
    args = parser.parse_args()

    import numba

    from kernelgym.core import cpu_threads

    rng = np.random.default_rng(0)
    print(
        f"# CartPole-v1, cpu backend, env-steps/s (median of {args.repeats} interleaved repeats); "
        f"{cpu_threads.usable_cpus()} cpus, numba {numba.__version__}, {numba.config.NUMBA_NUM_THREADS} threads"
    )
    print("| envs | busy | 1 thread | all threads | default | default / best | default / old default | load |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    worst = float("inf")
    for n in args.num_envs:
        envs = {strategy: make(n, strategy) for strategy in STRATEGIES}
        actions = [rng.integers(0, 2, n) for _ in range(ACTION_BATCHES)]
        for env in envs.values():  # a cpu step compiles at its first launch: not in the timing below
            run_for(env, actions, 3)
        # steps per repeat from the serial rate measured now, so each repeat lasts about --seconds
        steps = max(5, int(args.seconds * run_for(envs["one"], actions, max(5, 200_000 // n)) / n))
        for busy in args.busy:
            hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
            try:
                time.sleep(0.3)
                for strategy in STRATEGIES:
                    warm(envs[strategy], actions, args.warmup)
                rates = {strategy: [] for strategy in STRATEGIES}
                for _ in range(args.repeats):
                    for strategy in STRATEGIES:
                        rates[strategy].append(run_for(envs[strategy], actions, steps))
            finally:
                for hog in hogs:
                    hog.kill()
                    hog.wait()
            one, team, default = (statistics.median(rates[strategy]) for strategy in STRATEGIES)
            ratio = default / max(one, team)
            worst = min(worst, ratio)
            print(
                f"| {n:,} | {busy} | {one / 1e6:.2f} M | {team / 1e6:.2f} M | {default / 1e6:.2f} M | "
                f"{ratio:.2f}x | {default / team:.2f}x | {os.getloadavg()[0]:.1f} |",
                flush=True,
            )
        for env in envs.values():
            env.close()
    serial, team = cpu_threads.adaptive_counts()
    print(f"\nworst default / best: {worst:.2f}x; adaptive launches: {team:,} on the team, {serial:,} serial")
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")


if __name__ == "__main__":
    main()
