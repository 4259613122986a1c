"""CartPole-v1 env-steps/s of two kernelgym source trees, measured interleaved.

Compares the runtime of this checkout with another source tree (e.g. an older commit
exported with ``git archive <commit> packages/core/src packages/envs/src | tar -x -C DIR``)
on the cpu backend. Each measurement runs in a fresh subprocess whose ``PYTHONPATH``
puts the tree's ``packages/core/src`` and ``packages/envs/src`` first (the subprocess
checks that it imported that tree), and the trees take turns: A, B, A, B, ... so that a
change in the machine's load hits both alike. Prints a markdown table of medians.

    .venv/bin/python benchmarks/bench_cartpole_trees.py --before /tmp/baseline --after .
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

MEASURE = r"""
import json, sys, time
import numba, torch
import kernelgym.envs as kge
tree, n, steps, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
assert kge.__file__.startswith(tree), f"imported {kge.__file__}, expected the tree {tree}"
numba.set_num_threads(threads)
env = kge.make("CartPole-v1", n, backend="cpu", seed=0)
env.reset()
generator = torch.Generator().manual_seed(0)
actions = [torch.randint(0, 2, (n,), generator=generator) for _ in range(8)]
def run():
    for k in range(steps):
        env.step(actions[k % 8])
run()
start = time.perf_counter(); run(); elapsed = time.perf_counter() - start
print(json.dumps({"rate": n * steps / elapsed}))
"""


def measure(tree: Path, n: int, steps: int, threads: int, cache: Path) -> float:
    """One timed run (after a warm-up run) of ``tree``'s CartPole in a fresh process."""
    source_dirs = [str(tree / "packages" / name / "src") for name in ("core", "envs")]
    environment = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(source_dirs),
        KERNELGYM_CACHE_DIR=str(cache / tree.name),
        NUMBA_CACHE_DIR=str(cache / tree.name / "numba"),
    )
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(tree), str(n), str(steps), str(threads)],
        capture_output=True,
        text=True,
        env=environment,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"tree {tree}: the measurement failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])["rate"]


def main(argv=None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the source tree measured as 'before'")
    parser.add_argument("--after", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 65536])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved runs per tree and size")
    parser.add_argument("--budget", type=int, default=4_000_000, help="env-steps per timed run")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--cache", type=Path, default=Path("/tmp/kernelgym-bench-trees"))
    args = parser.parse_args(argv)
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    load_start = os.getloadavg()[0]
    rates = {(label, n): [] for label in trees for n in args.sizes}
    for n in args.sizes:
        steps = max(10, args.budget // n)
        for _ in range(args.rounds):
            for label, tree in trees.items():
                rates[label, n].append(measure(tree, n, steps, args.threads, args.cache))
                print(f"N={n} {label}: {rates[label, n][-1] / 1e6:.2f} M/s", file=sys.stderr)
    lines = [
        "| N | before (M env-steps/s) | after (M env-steps/s) | after / before |",
        "|---|---:|---:|---:|",
    ]
    for n in args.sizes:
        before, after = (statistics.median(rates[label, n]) for label in trees)
        lines.append(f"| {n} | {before / 1e6:.2f} | {after / 1e6:.2f} | {after / before:.2f}x |")
    header = (
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, {platform.system()}, load average "
        f"{load_start:.1f} at start and {os.getloadavg()[0]:.1f} at end (shared machine)\n"
        f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; Python "
        f"{platform.python_version()}; {args.threads} numba threads; cpu backend\n"
        f"- medians of {args.rounds} interleaved runs per tree (each a fresh process, a warm-up run, "
        f"then ~{args.budget:,} env-steps timed), torch actions\n"
        f"- command: `{' '.join(['.venv/bin/python', 'benchmarks/bench_cartpole_trees.py', *sys.argv[1:]])}`\n"
    )
    text = header + "\n" + "\n".join(lines) + "\n"
    print(text)
    return text


if __name__ == "__main__":
    main()
