"""Tag steps on the cpu backend: the phases fused into one launch against one launch per phase.

`kernelgym.core.bind_launches` fuses an agent env's phase programs into one launch where its
agents fit one block. This runs both Tag envs at 2,000 envs x 11 agents (WarpDrive's default
agent counts: 10 taggers and 1 runner on the grid, 1 tagger and 10 runners in the continuous
game) both ways, round after round in one process (so load changes hit both alike), and
reports env-steps/s, medians and min-max over ``--repeats`` rounds, and their ratio. Writes
``benchmarks/results/fused_step.md``.

    .venv/bin/python benchmarks/bench_fused_step.py
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results" / "fused_step.md"
WORKLOADS = (
    ("TagGridWorld-v0", {"num_taggers": 10, "num_runners": 1}),
    ("TagContinuous-v0", {"num_taggers": 1, "num_runners": 10}),
)


def make(env_id: str, num_envs: int, params: dict, fused: bool):
    """The env, its phases fused (the default) or one launch per phase."""
    import kernelgym.envs as kge
    from kernelgym.core import binding

    fuse = binding._fused
    if not fused:
        binding._fused = lambda programs, num_envs, num_agents: programs
    try:
        env = kge.make(env_id, num_envs, backend="cpu", seed=0, check_action_values=False, **params)
    finally:
        binding._fused = fuse
    env.reset(seed=0)
    return env


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", type=int, default=2_000)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    rows = []
    for env_id, params in WORKLOADS:
        envs = {fused: make(env_id, args.envs, params, fused) for fused in (True, False)}
        launches = {fused: len(env._step_launch.records) for fused, env in envs.items()}
        envs[True].action_space.seed(0)
        actions = [np.asarray(envs[True].action_space.sample()) for _ in range(4)]
        rates: dict = {True: [], False: []}
        for round_ in range(args.repeats + 1):  # round 0 warms up
            for fused, env in envs.items():
                start = time.perf_counter()
                for k in range(args.steps):
                    env.step(actions[k % 4])
                if round_:
                    rates[fused].append(args.envs * args.steps / (time.perf_counter() - start))
        for env in envs.values():
            env.close()
        rows.append((env_id, launches, rates))
    lines = [
        "## Tag on cpu: the step's phases fused into one launch (benchmarks/bench_fused_step.py)",
        "",
        f"{datetime.date.today()}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.2f} at the end; {args.envs:,} envs x 11 agents, "
        f"{args.steps} steps a round, medians (min-max) of {args.repeats} interleaved rounds.",
        "",
        "| env | launches fused | env-steps/s fused | launches per phase | env-steps/s per phase | fused / per phase |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for env_id, launches, rates in rows:
        cells = {
            fused: f"{statistics.median(r) / 1e3:,.0f} k ({min(r) / 1e3:,.0f}-{max(r) / 1e3:,.0f})"
            for fused, r in rates.items()
        }
        ratio = statistics.median(rates[True]) / statistics.median(rates[False])
        lines.append(
            f"| {env_id} | {launches[True]} | {cells[True]} | {launches[False]} | {cells[False]} | {ratio:.2f} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
