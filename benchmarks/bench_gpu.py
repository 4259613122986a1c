"""GPU throughput: CartPole at N = 2^12 .. 2^24, TagContinuous at 2,000 envs x 1,000 agents
(WarpDrive's headline setup: 2.9 M env-steps/s on one A100) and the DeviceCollector end
to end. Writes benchmarks/results/gpu_throughput.md, naming the GPU, row by row as each is
measured, and prints it. The whole GPU check (tests, sanitizers, sync counts, these numbers
and more) is benchmarks/gpu_check.

    .venv/bin/python benchmarks/bench_gpu.py                      # on a machine with a GPU
    .venv/bin/python benchmarks/bench_gpu.py --backend cpu --tiny # the same code path, tiny N

Without a usable GPU ``--backend cuda`` (the default) exits with code 2 and the reason.
Timing on cuda synchronizes the device once per timed run, never per step. Actions are
made on the device before timing; each number is the median of ``--repeats`` runs after
a warm-up.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import sys
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent / "gpu_check"))
from parts import cartpole_collector, env_rate, timed_median

# results/gpu.md holds the whole GPU check's section (benchmarks/gpu_check); this script's
# narrower throughput table is a section of its own
RESULTS = Path(__file__).resolve().parent / "results" / "gpu_throughput.md"
CARTPOLE_EXPONENTS = range(12, 25)  # N = 2^12 .. 2^24
TAG_ENVS, TAG_RUNNERS = 2_000, 999  # 1 tagger + 999 runners = 1,000 agents
# WarpDrive's Tag run config observes the 10 nearest agents (use_full_observation False)
TAG_NEAREST = 10
COLLECTOR_ENVS = 2**16


class Workload(NamedTuple):
    """One row: an env configuration (``collector``: stepped through a DeviceCollector)."""

    label: str
    env_id: str
    num_envs: int
    num_agents: int
    params: dict = {}
    collector: bool = False


def workloads(tiny: bool) -> list[Workload]:
    """Every row this script measures, in order (tests/test_memory_fit.py builds each one)."""
    exponents = [6, 7] if tiny else list(CARTPOLE_EXPONENTS)
    tag_envs, tag_runners = (4, 9) if tiny else (TAG_ENVS, TAG_RUNNERS)
    tag = {"num_taggers": 1, "num_runners": tag_runners}
    rows = [Workload("CartPole-v1", "CartPole-v1", 2**e, 1) for e in exponents]
    rows.append(
        Workload("TagContinuous-v0 (WarpDrive: 2.9 M on an A100)", "TagContinuous-v0", tag_envs, tag_runners + 1, tag)
    )
    rows.append(
        Workload(
            f"TagContinuous-v0, {TAG_NEAREST} nearest observed",
            "TagContinuous-v0",
            tag_envs,
            tag_runners + 1,
            {**tag, "use_full_observation": False, "num_other_agents_observed": min(TAG_NEAREST, tag_runners)},
        )
    )
    rows.append(
        Workload(
            "DeviceCollector CartPole-v1, MLP 4-32-2", "CartPole-v1", 64 if tiny else COLLECTOR_ENVS, 1, collector=True
        )
    )
    return rows


def median_rate(step_all, env_steps: int, repeats: int, backend: str) -> float:
    """Median env-steps/s of ``step_all()`` over ``repeats`` runs, after one warm-up."""
    return env_steps / timed_median(step_all, backend, repeats)


def collector_rate(num_envs: int, backend: str, n_steps: int, repeats: int) -> float:
    """DeviceCollector env-steps/s on CartPole with a 4-32-2 MLP actor (fragments of ``n_steps``)."""
    import torch

    env, collector = cartpole_collector(num_envs, n_steps, backend)
    try:
        with torch.no_grad():
            return median_rate(collector.collect, num_envs * n_steps, repeats, backend)
    finally:
        env.close()


def device_name(backend: str) -> str:
    if backend == "cuda":
        import torch

        return torch.cuda.get_device_name(0)
    return f"no GPU: backend {backend!r} on {platform.processor() or platform.machine()} (code-path check only)"


def header(backend: str, repeats: int) -> list[str]:
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    command = "python benchmarks/bench_gpu.py " + " ".join(sys.argv[1:])
    return [
        "## GPU throughput",
        "",
        f"- Device: {device_name(backend)}",
        f"- Date: {stamp}; command: `{command.strip()}`; median of {repeats} runs after a warm-up; "
        "actions made on the device beforehand, check_action_values=False; one device sync per timed run",
        "",
        "| workload | envs | agents | env-steps/s |",
        "|---|---:|---:|---:|",
    ]


def run(backend: str, tiny: bool, repeats: int, out: Path) -> str:
    """Every measurement, each row written to ``out`` as soon as it is measured; the markdown section."""
    steps = 5 if tiny else 100
    lines = header(backend, repeats)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    for workload in workloads(tiny):
        if workload.collector:
            rate = collector_rate(workload.num_envs, backend, 16 if not tiny else 4, repeats)
        else:
            # the 1,000-agent rows take ten times fewer steps
            rate = env_rate(
                workload.env_id,
                workload.num_envs,
                backend,
                steps if workload.num_agents == 1 else max(2, steps // 10),
                repeats,
                **workload.params,
            )
        envs = (
            f"2^{workload.num_envs.bit_length() - 1}"
            if workload.env_id == "CartPole-v1" and not workload.collector
            else f"{workload.num_envs:,}"
        )
        lines.append(f"| {workload.label} | {envs} | {workload.num_agents:,} | {rate:,.0f} |")
        print(lines[-1], flush=True)
        with out.open("a") as file:  # a row survives a later workload that fails or runs out of time
            file.write(lines[-1] + "\n")
    return "\n".join([*lines, ""])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--backend",
        default="cuda",
        choices=["cuda", "cpu"],
        help="cuda (default; the numbers this script is for) or cpu (checks the code path)",
    )
    parser.add_argument("--tiny", action="store_true", help="tiny N: check the code path, not a measurement")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS, help="markdown file to write (default: %(default)s)")
    options = parser.parse_args(argv)
    if options.repeats < 1:
        parser.error(f"argument --repeats: expected an int >= 1, received {options.repeats}")
    from kernelgym.core import BackendUnavailableError, resolve_backend

    try:
        backend = resolve_backend(options.backend)
    except BackendUnavailableError as error:
        print(
            f"bench_gpu: {error}. These benchmarks measure a GPU; run them where one is usable "
            "(or pass --backend cpu --tiny to check the code path).",
            file=sys.stderr,
        )
        return 2
    section = run(backend, options.tiny, options.repeats, options.out)
    options.out.write_text(section)
    print(f"\nwritten to {options.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
