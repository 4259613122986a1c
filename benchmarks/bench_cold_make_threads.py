"""Cold ``make()`` with the thread team's build against the serial build only, in ONE interleaved run.

At 128 or more (env, agent) pairs a cpu env binds numba's thread team (``prange``) unless
launches run one thread (``KERNELGYM_CPU_THREADS=one``), when binding compiles the serial
twin only (`kernelgym.core.cpu_threads.team_allowed`). Each measurement is a fresh Python
process with empty ``NUMBA_CACHE_DIR`` and ``KERNELGYM_CACHE_DIR`` that times ``make()``
and one reset (``import kernelgym.envs`` outside the timing); the strategies alternate
within each round, so both sides see the same load. Writes
benchmarks/results/cold_make_threads.md.

    .venv/bin/python benchmarks/bench_cold_make_threads.py --repeats 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "cold_make_threads.md"
STRATEGIES = ("adaptive", "one")
CHILD = """
import json, sys, time
import kernelgym.envs as kge
started = time.perf_counter()
env = kge.make(sys.argv[1], int(sys.argv[2]), backend="cpu", seed=0)
env.reset(seed=0)
print(json.dumps({"seconds": time.perf_counter() - started}))
"""


def cold_make(env_id: str, num_envs: int, strategy: str) -> float:
    """Seconds of ``make()`` and a reset in a fresh process with empty compile caches."""
    with tempfile.TemporaryDirectory() as caches:
        env = dict(
            os.environ,
            KERNELGYM_CPU_THREADS=strategy,
            NUMBA_CACHE_DIR=str(Path(caches) / "numba"),
            KERNELGYM_CACHE_DIR=str(Path(caches) / "kernelgym"),
        )
        out = subprocess.run(
            [sys.executable, "-c", CHILD, env_id, str(num_envs)], env=env, capture_output=True, text=True, check=True
        )
    return json.loads(out.stdout.strip().splitlines()[-1])["seconds"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=["CartPole-v1", "TagContinuous-v0"], help="env ids")
    parser.add_argument("--num-envs", type=int, default=512, help="envs per make (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=1, help="interleaved rounds (default: %(default)s)")
    options = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    times: dict = {(env_id, s): [] for env_id in options.envs for s in STRATEGIES}
    for _ in range(options.repeats):
        for env_id in options.envs:
            for strategy in STRATEGIES:
                times[env_id, strategy].append(cold_make(env_id, options.num_envs, strategy))
                print(env_id, strategy, f"{times[env_id, strategy][-1]:.1f} s", flush=True)
    lines = [
        f"Cold make() + reset at {options.num_envs} envs, cpu, median of {options.repeats} interleaved round(s); "
        f"load {load_before:.2f} at the start, {os.getloadavg()[0]:.2f} at the end.",
        "",
        "| env | team's build (adaptive) | serial build only (one) | one / adaptive |",
        "|---|---:|---:|---:|",
    ]
    for env_id in options.envs:
        team, serial = (statistics.median(times[env_id, s]) for s in STRATEGIES)
        lines.append(f"| {env_id} | {team:.1f} s | {serial:.1f} s | {serial / team:.2f} |")
    RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
