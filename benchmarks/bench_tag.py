"""Tag at WarpDrive's scale on the cpu backend: TagContinuous and TagGridWorld at 16, 200
and 2,000 envs x 1,000 agents; TagContinuous observing the K = 2 and K = 10 nearest, found
by all pairs or by the grid (`kernelgym.envs.tag.continuous.nearest_by_grid`).

    .venv/bin/python benchmarks/bench_tag.py                 # writes results/tag_cpu.md
    .venv/bin/python benchmarks/bench_tag.py --envs 16 200   # a subset of the env counts

The variants of one env count are built side by side and stepped in turn (one
interleaved run: a load change on a shared machine hits every variant alike); each row
is the best single step of that cell, after a warm-up step, in rounds of one step of
each variant until one variant has spent ``--cell-seconds`` (at least one round). Each
row is written to the results file as soon as it is measured. TagGridWorld observes every
agent (WarpDrive's game has no K): at 2,000 envs
its observations alone are 32 GB, so rows that need more memory than the machine has
available are written as skipped, with the bytes they need.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import sys
import time
from pathlib import Path
from typing import NamedTuple

RESULTS = Path(__file__).resolve().parent / "results" / "tag_cpu.md"
ENV_COUNTS = (16, 200, 2_000)
NEAREST = (2, 10)
AGENTS = 1_000
# WarpDrive's published Tag configuration, for the rows' side column
WARPDRIVE = (
    "WarpDrive (paper, A100): 2,000 envs x 1,000 agents, 2.9 M env-steps/s; its run config "
    "tag_continuous.yaml: 5 taggers, 100 runners, use_full_observation False, "
    "num_other_agents_observed 10"
)


class Workload(NamedTuple):
    """One row: an env id, its env count and params, and its label."""

    label: str
    env_id: str
    num_envs: int
    num_agents: int
    params: dict


def workloads(env_counts=ENV_COUNTS) -> list[Workload]:
    """Every row, grouped by env count (tests/test_memory_fit.py builds each one)."""
    rows = []
    for num_envs in env_counts:
        for nearest in NEAREST:
            for grid in (False, True):
                params = {
                    "num_taggers": 1,
                    "num_runners": AGENTS - 1,
                    "use_full_observation": False,
                    "num_other_agents_observed": nearest,
                    "grid_neighbours": grid,
                }
                rows.append(
                    Workload(
                        f"TagContinuous-v0, K={nearest}, {'grid' if grid else 'all pairs'}",
                        "TagContinuous-v0",
                        num_envs,
                        AGENTS,
                        params,
                    )
                )
        rows.append(
            Workload(
                "TagGridWorld-v0, full observation",
                "TagGridWorld-v0",
                num_envs,
                AGENTS,
                {"num_taggers": AGENTS - 1, "num_runners": 1},
            )
        )
    return rows


def buffer_bytes(workload: Workload) -> int:
    """The observation buffer's bytes (the one that grows with N x A x obs)."""
    from kernelgym.envs.registry import get_spec

    resolved = get_spec(workload.env_id).resolve(type(get_spec(workload.env_id).params)(**workload.params))
    return workload.num_envs * workload.num_agents * resolved.observation_space.shape[0] * 4


def available_bytes() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def measure_group(group: list[Workload], cell_seconds: float) -> list[float]:
    """Best step time of each workload of ``group``, stepped in turn (one interleaved run)."""
    import torch

    import kernelgym.envs as kge

    envs, actions = [], []
    for workload in group:
        env = kge.make(
            workload.env_id,
            num_envs=workload.num_envs,
            backend="cpu",
            seed=0,
            check_action_values=False,
            **workload.params,
        )
        env.reset(seed=0)
        env.action_space.seed(0)
        actions.append(torch.as_tensor(env.action_space.sample()))
        env.step(actions[-1])  # warm-up
        envs.append(env)
    # rounds of one step of each variant: every variant gets as many timed steps (a best of
    # more tries would favour the fast variants on a loaded machine)
    best, spent = [float("inf")] * len(group), [0.0] * len(group)
    while max(spent) < cell_seconds:
        for k in range(len(group)):
            start = time.perf_counter()
            envs[k].step(actions[k])
            elapsed = time.perf_counter() - start
            best[k], spent[k] = min(best[k], elapsed), spent[k] + elapsed
    for env in envs:
        env.close()
    return best


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, nargs="+", default=list(ENV_COUNTS))
    parser.add_argument(
        "--cell-seconds",
        type=float,
        default=20.0,
        help="time cap of a cell's timed steps (default %(default)s; at least one step)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    options = parser.parse_args(argv)
    import numba

    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "## Tag at WarpDrive's scale, cpu backend",
        "",
        f"- Machine: {platform.processor() or platform.machine()}, numba threads {numba.get_num_threads()}; "
        f"date {stamp}; command `python benchmarks/bench_tag.py {' '.join(sys.argv[1:])}`",
        f"- Best step of each cell after a warm-up step, in rounds of one step of each variant of an env "
        f"count until one has spent {options.cell_seconds:g} s; random actions, check_action_values=False",
        f"- {WARPDRIVE}",
        "",
        "| workload | envs | agents | env-steps/s | step (s) |",
        "|---|---:|---:|---:|---:|",
    ]
    options.out.parent.mkdir(parents=True, exist_ok=True)
    options.out.write_text("\n".join(lines) + "\n")

    def emit(line):
        lines.append(line)
        print(line, flush=True)
        with options.out.open("a") as file:
            file.write(line + "\n")

    rows = workloads(options.envs)
    for num_envs in options.envs:
        group = [w for w in rows if w.num_envs == num_envs]
        # the variants live side by side: leave a quarter of the memory free
        fits = [
            w for w in group if sum(buffer_bytes(x) for x in group[: group.index(w) + 1]) < 0.75 * available_bytes()
        ]
        for workload in group:
            if workload not in fits:
                emit(
                    f"| {workload.label} | {num_envs:,} | {workload.num_agents:,} | skipped: its observations "
                    f"need {buffer_bytes(workload) / 2**30:.1f} GiB | - |"
                )
        for workload, seconds in zip(fits, measure_group(fits, options.cell_seconds)):
            emit(
                f"| {workload.label} | {num_envs:,} | {workload.num_agents:,} | "
                f"{num_envs / seconds:,.0f} | {seconds:.3f} |"
            )
    print(f"\nwritten to {options.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
