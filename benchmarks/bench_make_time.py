"""How long ``kernelgym.envs.make`` takes, cold and warm, in fresh processes, in ONE interleaved run.

For CartPole-v1 and MinAtar-Breakout-v1 (``backend="cpu"``, 16 envs), each measurement is
a new Python process that times ``import kernelgym.envs`` plus ``make()``:

- ``warm``: with the launcher and Numba caches filled by an earlier process (what every
  later run, test process and kit variant pays);
- ``warm, torch preloaded``: the same after ``import torch, numba, gymnasium`` outside the
  timing (a test or training process that has them already);
- ``cold``: with fresh, empty ``NUMBA_CACHE_DIR`` and ``KERNELGYM_CACHE_DIR`` (the first
  run on a machine, or after an upgrade).

With ``--base`` an older checkout (``git worktree add /tmp/base main``) is timed in the
same rounds, through ``PYTHONPATH``, with caches of its own, so that before and after are
ratios from one run. Medians and min-max of ``--repeats`` rounds (cold: ``--cold-repeats``),
and the load average at the start and the end; writes benchmarks/results/make_time.md.

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
    environment = {**os.environ, "KERNELGYM_CACHE_DIR": str(caches), "NUMBA_CACHE_DIR": str(caches / "numba")}
    if checkout is not None:
        sources = [checkout / "packages" / name / "src" for name in ("core", "envs", "minatar")]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="an older kernelgym checkout to time in the same rounds")
    parser.add_argument("--base-label", help="what --base is, for the notes (default: its git commit)")
    parser.add_argument("--repeats", type=int, default=5, help="warm rounds (default: %(default)s)")
    parser.add_argument("--cold-repeats", type=int, default=1, help="cold rounds (default: %(default)s)")
    parser.add_argument("--envs", nargs="+", default=list(ENV_IDS), help="env ids (default: %(default)s)")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="kernelgym-make-time-"))
    checkouts = {"now": None, **({"before": args.base} if args.base is not None else {})}
    warm_caches = {name: work / f"warm-{name}" for name in checkouts}
    kinds = ("warm", "warm, torch preloaded", "cold")
    times = {(name, env_id, kind): [] for name in checkouts for env_id in args.envs for kind in kinds}
    load_start = load_average()
    for name, checkout in checkouts.items():  # fill the warm caches (not timed)
        for env_id in args.envs:
            probe(env_id, checkout_environment(checkout, warm_caches[name]), preload=False)
    for round_ in range(max(args.repeats, args.cold_repeats)):
        # every other round in reverse order, so that a drift of the load favours neither checkout
        order = list(checkouts.items())[:: -1 if round_ % 2 else 1]
        for env_id in args.envs:
            for name, checkout in order:
                warm = checkout_environment(checkout, warm_caches[name])
                if round_ < args.repeats:
                    times[name, env_id, "warm"].append(probe(env_id, warm, preload=False))
                    times[name, env_id, "warm, torch preloaded"].append(probe(env_id, warm, preload=True))
                if round_ < args.cold_repeats:
                    cold = checkout_environment(checkout, work / f"cold-{name}-{env_id}-{round_}")
                    times[name, env_id, "cold"].append(probe(env_id, cold, preload=False))
    load_end = load_average()

    lines = [
        "| env | make() | "
        + " | ".join(f"{name} (s), median [min-max]" for name in checkouts)
        + (" | now / before |" if args.base is not None else ""),
        "|---|---|" + "---:|" * (len(checkouts) + (args.base is not None)),
    ]
    for env_id in args.envs:
        for kind in kinds:
            medians = {name: statistics.median(times[name, env_id, kind]) for name in checkouts}
            cells = [
                f"{medians[name]:.2f} [{min(times[name, env_id, kind]):.2f}-{max(times[name, env_id, kind]):.2f}]"
                for name in checkouts
            ]
            ratio = [f"{medians['now'] / medians['before']:.2f}x"] if args.base is not None else []
            lines.append(f"| {env_id} | {kind} | " + " | ".join(cells + ratio) + " |")
    notes = (
        f"Fresh process per figure: `import kernelgym.envs` + `make(env_id, 16, backend='cpu')`; warm: "
        f"{args.repeats} rounds, cold: {args.cold_repeats} (fresh NUMBA_CACHE_DIR and KERNELGYM_CACHE_DIR). "
        f"Load average (1 min) at the start and the end: {load_start:.1f}, {load_end:.1f} on {os.cpu_count()} "
        f"cores; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}."
    )
    if args.base is not None:
        label = (
            args.base_label
            or subprocess.run(
                ["git", "-C", str(args.base), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
            ).stdout.strip()
        )
        notes += f" before: {label or 'an unnamed checkout'} ({args.base})."
    text = "\n".join(lines) + "\n\n" + notes + "\n"
    print(text)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(text)


if __name__ == "__main__":
    main()
