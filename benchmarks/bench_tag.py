"""Tag at WarpDrive's scale on the cpu backend: TagContinuous and TagGridWorld at 16, 200
and 2,000 envs x 1,000 agents; TagContinuous observing the K = 2 and K = 10 nearest, found
by all pairs or by the grid (`kernelgym.envs.tag.continuous.nearest_by_grid`); TagGridWorld
with every agent observed, and in WarpDrive's own configuration (999 taggers, 1 runner,
partial observation: 6 floats per agent).

    .venv/bin/python benchmarks/bench_tag.py                 # writes results/tag_cpu.md
    .venv/bin/python benchmarks/bench_tag.py --envs 16 200   # a subset of the env counts
    .venv/bin/python benchmarks/bench_tag.py --backend cuda --envs 2000 --only-warpdrive

WarpDrive's rows step with random actions made on the env's device (4 batches, made before
the timing, in turn) and report the bytes their step moves (`bytes_per_env_step`) as a rate
against the machine's bandwidth, measured in the same run by a plain copy.

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

RESULTS = Path(__file__).resolve().parent / "results" / "tag_{backend}.md"
ENV_COUNTS = (16, 200, 2_000)
NEAREST = (2, 10)
AGENTS = 1_000
# WarpDrive's published Tag configuration, for the rows' side column
WARPDRIVE = (
    "WarpDrive (paper, A100): 2,000 envs x 1,000 agents, 2.9 M env-steps/s; its run config "
    "tag_continuous.yaml: 5 taggers, 100 runners, use_full_observation False, "
    "num_other_agents_observed 10"
)


WARPDRIVE_GRIDWORLD = {"num_taggers": AGENTS - 1, "num_runners": 1, "use_full_observation": False}
ACTION_BATCHES = 4


class Workload(NamedTuple):
    """One row: an env id, its env count and params, and its label."""

    label: str
    env_id: str
    num_envs: int
    num_agents: int
    params: dict

    @property
    def warpdrive(self) -> bool:
        """WarpDrive's configuration: random actions made on the device, bytes per step reported."""
        return self.env_id == "TagGridWorld-v0" and self.params == WARPDRIVE_GRIDWORLD


def bytes_per_env_step(num_agents: int) -> int:
    """Bytes one TagGridWorld env-step with the partial observation must move, per env.

    Per agent: its int64 action read, its int32 x and y and its bool in-game flag read and
    written, its 6 float32 observations and float32 reward written (54 B). Per env: the
    int32 clock and runners count read and written, the terminated, truncated and done flags
    written (19 B). What an implementation moves beyond this (kernelgym's episode
    statistics, a second pass over a buffer) shows as a lower share of the bandwidth.
    """
    per_agent = 8 + 2 * (4 + 4 + 1) + 6 * 4 + 4
    per_env = 2 * (4 + 4) + 3
    return num_agents * per_agent + per_env


def workloads(env_counts=ENV_COUNTS, only_warpdrive: bool = False) -> list[Workload]:
    """Every row, grouped by env count (tests/test_memory_fit.py builds each one)."""
    rows = []
    for num_envs in env_counts:
        rows.append(
            Workload(
                "TagGridWorld-v0, WarpDrive's: 999 taggers, 1 runner, partial observation",
                "TagGridWorld-v0",
                num_envs,
                AGENTS,
                dict(WARPDRIVE_GRIDWORLD),
            )
        )
        if only_warpdrive:
            continue
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


def device_actions(env, workload: Workload, count: int, seed: int) -> list:
    """``count`` batches of random int64 actions in [0, 5), made on the env's device by torch."""
    import torch

    generator = torch.Generator(device=env.device).manual_seed(seed)
    shape = (workload.num_envs, workload.num_agents)
    return [torch.randint(0, 5, shape, generator=generator, device=env.device, dtype=torch.int64) for _ in range(count)]


def synchronize(backend: str) -> None:
    if backend == "cuda":
        import torch

        torch.cuda.synchronize()


def bandwidth_bytes_per_s(backend: str) -> float:
    """The machine's bandwidth: the best of 5 copies of 1 GiB (256 MiB on the cpu), bytes read plus written."""
    import torch

    device = "cuda" if backend == "cuda" else "cpu"
    source = torch.ones(2**30 if backend == "cuda" else 2**28, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    target.copy_(source)  # warm-up: the pages are touched
    best = float("inf")
    for _ in range(5):
        synchronize(backend)
        start = time.perf_counter()
        target.copy_(source)
        synchronize(backend)
        best = min(best, time.perf_counter() - start)
    return 2 * source.numel() / best


def measure_group(group: list[Workload], cell_seconds: float, backend: str = "cpu") -> list[float]:
    """Best step time of each workload of ``group``, stepped in turn (one interleaved run)."""
    import torch

    import kernelgym.envs as kge

    envs, actions = [], []
    for workload in group:
        env = kge.make(
            workload.env_id,
            num_envs=workload.num_envs,
            backend=backend,
            seed=0,
            check_action_values=False,
            **workload.params,
        )
        env.reset(seed=0)
        if workload.warpdrive:
            actions.append(device_actions(env, workload, ACTION_BATCHES, seed=0))
        else:
            env.action_space.seed(0)
            actions.append([torch.as_tensor(env.action_space.sample(), device=env.device)])
        env.step(actions[-1][0])  # warm-up
        envs.append(env)
    # rounds of one step of each variant: every variant gets as many timed steps (a best of
    # more tries would favour the fast variants on a loaded machine)
    best, spent = [float("inf")] * len(group), [0.0] * len(group)
    rounds = 0
    while max(spent) < cell_seconds:
        for k in range(len(group)):
            synchronize(backend)
            start = time.perf_counter()
            envs[k].step(actions[k][rounds % len(actions[k])])
            synchronize(backend)
            elapsed = time.perf_counter() - start
            best[k], spent[k] = min(best[k], elapsed), spent[k] + elapsed
        rounds += 1
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
    parser.add_argument("--backend", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument(
        "--only-warpdrive", action="store_true", help="only WarpDrive's TagGridWorld configuration rows"
    )
    parser.add_argument("--out", type=Path, default=None, help="results file (default results/tag_BACKEND.md)")
    options = parser.parse_args(argv)
    import numba

    out = options.out or Path(str(RESULTS).format(backend=options.backend))
    bandwidth = bandwidth_bytes_per_s(options.backend)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else ["?"] * 3
    lines = [
        f"## Tag at WarpDrive's scale, {options.backend} backend",
        "",
        f"- Machine: {platform.processor() or platform.machine()}, numba threads {numba.get_num_threads()}; "
        f"load average {' '.join(load)} at the start; date {stamp}; "
        f"command `python benchmarks/bench_tag.py {' '.join(sys.argv[1:])}`",
        f"- Best step of each cell after a warm-up step, in rounds of one step of each variant of an env "
        f"count until one has spent {options.cell_seconds:g} s; random actions, check_action_values=False",
        f"- Measured bandwidth (a copy, bytes read plus written): {bandwidth / 1e9:.1f} GB/s; WarpDrive's rows "
        f"move {bytes_per_env_step(AGENTS):,} B per env-step (`bytes_per_env_step`)",
        f"- {WARPDRIVE}",
        "",
        "| workload | envs | agents | env-steps/s | step (s) | GB/s moved (share of bandwidth) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)

    def emit(line):
        lines.append(line)
        print(line, flush=True)
        with out.open("a") as file:
            file.write(line + "\n")

    rows = workloads(options.envs, options.only_warpdrive)
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
                    f"need {buffer_bytes(workload) / 2**30:.1f} GiB | - | - |"
                )
        for workload, seconds in zip(fits, measure_group(fits, options.cell_seconds, options.backend)):
            moved = "-"
            if workload.warpdrive:
                rate = num_envs * bytes_per_env_step(workload.num_agents) / seconds
                moved = f"{rate / 1e9:.2f} ({rate / bandwidth:.1%})"
            emit(
                f"| {workload.label} | {num_envs:,} | {workload.num_agents:,} | "
                f"{num_envs / seconds:,.0f} | {seconds:.4g} | {moved} |"
            )
    print(f"\nwritten to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
