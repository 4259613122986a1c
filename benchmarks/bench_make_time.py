"""How long ``kernelgym.envs.make`` takes, cold and warm, in fresh processes, in ONE interleaved run.

For CartPole-v1 and MinAtar-Breakout-v1 (``backend="cpu"``, 16 envs), each measurement is
a new Python process that times ``import kernelgym.envs`` plus ``make()``:

- ``warm``: with the launcher and Numba caches filled by an earlier process (what every
  later run, test process and kit variant pays);
- ``warm, torch preloaded``: the same after ``import torch, numba, gymnasium`` outside the
  timing (a test or training process that has them already);
- ``cold``: with fresh, empty ``NUMBA_CACHE_DIR`` and ``KERNELGYM_CACHE_DIR`` (the first
  run on a machine, or after an upgrade).

Also (``--parts cli``) how long the ``kernelgym`` command takes to refuse a wrong argument
(exit code 2), wall-clock including the interpreter's start: an unknown env id, one in the
wrong case, an unknown ``--checks`` name, ``bench`` of an unknown id and ``demo --backend
sim`` without the simulator variable.

With ``--base`` an older checkout (``git worktree add /tmp/base main``) is timed in the
same rounds, through ``PYTHONPATH``, with caches of its own, so that before and after are
ratios from one run. Medians and min-max of ``--repeats`` rounds (cold: ``--cold-repeats``),
and the load average at the start and the end; writes benchmarks/results/make_time.md and
benchmarks/results/cli_errors.md.

    .venv/bin/python benchmarks/bench_make_time.py --base /tmp/base
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENV_IDS = ("CartPole-v1", "MinAtar-Breakout-v1")
RESULTS = Path(__file__).resolve().parent / "results" / "make_time.md"
CLI_RESULTS = RESULTS.with_name("cli_errors.md")
CLI_ERRORS = (
    ("check NoSuch-v0", ["check", "NoSuch-v0"]),
    ("check cartpole-v1", ["check", "cartpole-v1"]),
    ("check CartPole-v1 --checks nosuch", ["check", "CartPole-v1", "--checks", "nosuch"]),
    ("bench NoSuch-v0", ["bench", "NoSuch-v0"]),
    ("demo --backend sim", ["demo", "--backend", "sim"]),
)
ROOT = Path(__file__).resolve().parent.parent

PROBE = r"""
import json, sys, time
env_id, preload = sys.argv[1], sys.argv[2] == "1"
if preload:
    import gymnasium, numba, torch  # noqa: F401
started = time.perf_counter()
import kernelgym.envs as kge
env = kge.make(env_id, 16, backend="cpu", seed=0)
print(json.dumps({"seconds": time.perf_counter() - started}))
"""


def load_average() -> float:
    """The 1-minute load average (other jobs on the machine slow every figure)."""
    return os.getloadavg()[0]


def checkout_environment(checkout: Path | None, caches: Path) -> dict:
    """The environment of a probe: this tree, or ``checkout``'s sources first on the path."""
    environment = {key: value for key, value in os.environ.items() if key != "NUMBA_ENABLE_CUDASIM"}
    environment = {**environment, "KERNELGYM_CACHE_DIR": str(caches), "NUMBA_CACHE_DIR": str(caches / "numba")}
    if checkout is not None:
        sources = [checkout / "src", *(checkout / "packages" / name / "src" for name in ("core", "envs", "minatar"))]
        environment["PYTHONPATH"] = os.pathsep.join(str(path) for path in sources)
    return environment


def probe(env_id: str, environment: dict, preload: bool) -> float:
    """Seconds of ``import kernelgym.envs`` + ``make(env_id)`` in a new process."""
    completed = subprocess.run(
        [sys.executable, "-c", PROBE, env_id, "1" if preload else "0"],
        capture_output=True,
        text=True,
        env=environment,
        timeout=1800,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"the probe of {env_id} failed:\n{completed.stderr}")
    return json.loads(completed.stdout.strip().splitlines()[-1])["seconds"]


def refusal_seconds(argv: list[str], environment: dict) -> float:
    """Wall-clock seconds of ``python -m kernelgym.cli argv``, which must exit with code 2."""
    started = time.perf_counter()
    completed = subprocess.run(
        [sys.executable, "-m", "kernelgym.cli", *argv], capture_output=True, text=True, env=environment, timeout=600
    )
    seconds = time.perf_counter() - started
    if completed.returncode != 2:
        raise RuntimeError(f"kernelgym {' '.join(argv)} exited {completed.returncode}, not 2:\n{completed.stderr}")
    return seconds


def table(rows: dict, checkouts: dict, first: str) -> list[str]:
    """Markdown rows of medians [min-max] per checkout, and now / before when both ran."""
    both = "before" in checkouts
    lines = [
        f"| {first} | "
        + " | ".join(f"{name} (s), median [min-max]" for name in checkouts)
        + (" | now / before |" if both else " |"),
        "|---|" + "---:|" * (len(checkouts) + both),
    ]
    for label, per_checkout in rows.items():
        if not all(per_checkout.values()):  # a kind not measured in this run (--repeats 0)
            continue
        medians = {name: statistics.median(per_checkout[name]) for name in checkouts}
        cells = [
            f"{medians[name]:.2f} [{min(per_checkout[name]):.2f}-{max(per_checkout[name]):.2f}]" for name in checkouts
        ]
        ratio = [f"{medians['now'] / medians['before']:.2f}x"] if both else []
        lines.append(f"| {label} | " + " | ".join(cells + ratio) + " |")
    return lines


def measure_make(args, checkouts: dict, work: Path) -> list[str]:
    """The make() table: warm, warm with torch preloaded, and cold, per env and checkout."""
    warm_caches = {name: work / f"warm-{name}" for name in checkouts}
    kinds = ("warm", "warm, torch preloaded", "cold", "cold, torch preloaded")
    times = {(env_id, kind): {name: [] for name in checkouts} for env_id in args.envs for kind in kinds}
    for name, checkout in checkouts.items() if args.repeats else ():  # fill the warm caches (not timed)
        for env_id in args.envs:
            probe(env_id, checkout_environment(checkout, warm_caches[name]), preload=False)
    for round_ in range(max(args.repeats, args.cold_repeats)):
        # every other round in reverse order, so that a drift of the load favours neither checkout
        order = list(checkouts.items())[:: -1 if round_ % 2 else 1]
        for env_id in args.envs:
            for name, checkout in order:
                warm = checkout_environment(checkout, warm_caches[name])
                if round_ < args.repeats:
                    times[env_id, "warm"][name].append(probe(env_id, warm, preload=False))
                    times[env_id, "warm, torch preloaded"][name].append(probe(env_id, warm, preload=True))
                if round_ < args.cold_repeats:
                    for preload, kind in ((False, "cold"), (True, "cold, torch preloaded")):
                        caches = work / f"{kind.replace(', ', '-').replace(' ', '-')}-{name}-{env_id}-{round_}"
                        times[env_id, kind][name].append(probe(env_id, checkout_environment(checkout, caches), preload))
    rows = {f"{env_id}, {kind}": per_checkout for (env_id, kind), per_checkout in times.items()}
    # without .pyc files every kernelgym module is compiled from source at each import (about
    # 0.4 s of a warm make on a quiet 2-core machine): say which case the figures are
    bytecode = "off (PYTHONDONTWRITEBYTECODE set)" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "on"
    return table(rows, checkouts, "env, make()") + [
        "",
        f"Fresh process per figure: `import kernelgym.envs` + `make(env_id, 16, backend='cpu')` (torch "
        "preloaded: gymnasium, numba and torch imported before the clock starts, as in a trainer); warm: "
        f"{args.repeats} rounds, cold: {args.cold_repeats} (fresh NUMBA_CACHE_DIR and KERNELGYM_CACHE_DIR). "
        f"KERNELGYM_CPU_THREADS={os.environ.get('KERNELGYM_CPU_THREADS', '(unset)')}; Python's bytecode cache: "
        f"{bytecode}.",
    ]


def measure_cli(args, checkouts: dict, work: Path) -> list[str]:
    """The table of the command's refusals, per case and checkout."""
    times = {label: {name: [] for name in checkouts} for label, _ in CLI_ERRORS}
    for round_ in range(args.repeats):
        order = list(checkouts.items())[:: -1 if round_ % 2 else 1]
        for label, argv in CLI_ERRORS:
            for name, checkout in order:
                environment = checkout_environment(checkout, work / f"cli-{name}")
                times[label][name].append(refusal_seconds(argv, environment))
    return table({f"`kernelgym {label}`": row for label, row in times.items()}, checkouts, "refused (exit 2)") + [
        "",
        f"Wall-clock of `python -m kernelgym.cli ...` in a new process, {args.repeats} rounds.",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="an older kernelgym checkout to time in the same rounds")
    parser.add_argument("--base-label", help="what --base is, for the notes (default: its git commit)")
    parser.add_argument("--repeats", type=int, default=5, help="warm rounds (default: %(default)s)")
    parser.add_argument("--cold-repeats", type=int, default=1, help="cold rounds (default: %(default)s)")
    parser.add_argument("--envs", nargs="+", default=list(ENV_IDS), help="env ids (default: %(default)s)")
    parser.add_argument(
        "--parts", nargs="+", choices=("make", "cli"), default=["make", "cli"], help="what to measure (default: both)"
    )
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="kernelgym-make-time-"))
    checkouts = {"now": None, **({"before": args.base} if args.base is not None else {})}
    machine = f"{os.cpu_count()} cores"
    if args.base is not None:
        label = (
            args.base_label
            or subprocess.run(
                ["git", "-C", str(args.base), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
            ).stdout.strip()
        )
        machine += f"; before: {label or 'an unnamed checkout'} ({args.base})"
    for part, measure, results in (("make", measure_make, RESULTS), ("cli", measure_cli, CLI_RESULTS)):
        if part not in args.parts:
            continue
        load_start = load_average()
        lines = measure(args, checkouts, work)
        lines.append(
            f"Load average (1 min) at the start and the end: {load_start:.1f}, {load_average():.1f} on {machine}; "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}."
        )
        text = "\n".join(lines) + "\n"
        print(text)
        results.parent.mkdir(exist_ok=True)
        results.write_text(text)


if __name__ == "__main__":
    main()
