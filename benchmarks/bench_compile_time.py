"""How long numba and numba-cuda take to compile kernelgym's largest programs, cold (issue #36).

Each probe is a fresh process with empty caches of its own (``NUMBA_CACHE_DIR``,
``KERNELGYM_CACHE_DIR``):

- ``serial``: TagContinuous-v0's serial twin (``KERNELGYM_CPU_THREADS=one``): make 16 envs,
  reset, one step; seconds from ``make`` to the step's return (the reset and step programs
  compile);
- ``team``: TagGridWorld-v0's thread-team build (``KERNELGYM_CPU_THREADS=all``, numba's
  parallel pipeline), the same at 4,096 envs;
- ``gpu``: ``kernelgym gpu-compile TagContinuous-v0`` (NVIDIA's NVVM and ptxas, no GPU): the
  seconds its kernels took to compile for sm_90a and sm_80, summed from its ``--verbose``
  lines (the cpu workloads it runs first are not counted).

``--base`` times an older checkout in the same rounds, its sources first on ``PYTHONPATH``
(``git archive REF | tar -x -C DIR``), so that before and after see the same load. Writes
benchmarks/results/compile_time.md.

    .venv/bin/python benchmarks/bench_compile_time.py --base /tmp/base --rounds 1
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "compile_time.md"
STEP_PROBE = """
import json, sys, time
import numpy as np
import kernelgym.envs as kge
env_id, num_envs = sys.argv[1], int(sys.argv[2])
started = time.perf_counter()
env = kge.make(env_id, num_envs, backend="cpu", seed=0)
env.reset(seed=0)
env.step(np.asarray(env.action_space.sample()))
print(json.dumps({"seconds": time.perf_counter() - started}))
"""
KERNEL_LINE = re.compile(r"^\s+ok .* \(([0-9.]+) s\)$", re.MULTILINE)
PROBES = ("serial", "team", "gpu")


def environment(checkout: Path | None, caches: Path, threads: str) -> dict:
    """This tree's environment, or ``checkout``'s sources first on the path; empty caches."""
    found = {key: value for key, value in os.environ.items() if key != "NUMBA_ENABLE_CUDASIM"}
    found["KERNELGYM_CACHE_DIR"] = str(caches / "kernelgym")
    found["NUMBA_CACHE_DIR"] = str(caches / "numba")
    found["KERNELGYM_CPU_THREADS"] = threads
    if checkout is not None:
        sources = [checkout / "src", *(checkout / "packages" / name / "src" for name in ("core", "envs"))]
        found["PYTHONPATH"] = os.pathsep.join(str(path) for path in sources)
    return found


def probe(kind: str, checkout: Path | None, work: Path) -> float:
    """Seconds of one cold probe of ``kind`` (see the module docstring)."""
    caches = Path(tempfile.mkdtemp(dir=work))
    if kind == "gpu":
        command = [sys.executable, "-c", "import sys; from kernelgym.cli.main import main; sys.exit(main())"]
        command += ["gpu-compile", "--verbose", "TagContinuous-v0"]
        completed = subprocess.run(
            command, capture_output=True, text=True, env=environment(checkout, caches, "one"), timeout=3600
        )
        if completed.returncode != 0:
            raise RuntimeError(f"kernelgym gpu-compile failed:\n{completed.stdout[-3000:]}\n{completed.stderr[-3000:]}")
        return sum(float(seconds) for seconds in KERNEL_LINE.findall(completed.stderr))  # --verbose writes to stderr
    serial = kind == "serial"
    env_id, num_envs, threads = ("TagContinuous-v0", 16, "one") if serial else ("TagGridWorld-v0", 4096, "all")
    completed = subprocess.run(
        [sys.executable, "-c", STEP_PROBE, env_id, str(num_envs)],
        capture_output=True,
        text=True,
        env=environment(checkout, caches, threads),
        timeout=3600,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"the {kind} probe failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])["seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="an older checkout's tree (git archive) to time in the same rounds")
    parser.add_argument("--base-label", default="", help="what --base is, for the notes (e.g. its commit)")
    parser.add_argument("--rounds", type=int, default=1, help="interleaved rounds (default: %(default)s)")
    parser.add_argument("--probes", nargs="+", default=list(PROBES), choices=PROBES)
    args = parser.parse_args()
    checkouts = {"now": None, **({"before": args.base} if args.base is not None else {})}
    started_load = os.getloadavg()[0]
    seconds: dict = {(kind, name): [] for kind in args.probes for name in checkouts}
    with tempfile.TemporaryDirectory(prefix="kernelgym-compile-bench-") as work:
        for _ in range(args.rounds):
            for kind in args.probes:
                for name, checkout in checkouts.items():
                    seconds[kind, name].append(probe(kind, checkout, Path(work)))
                    print(kind, name, round(seconds[kind, name][-1], 1), flush=True)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    lines = [
        f"Cold compiles, median of {args.rounds} interleaved round(s), load average {started_load:.2f} at the start, "
        f"{os.getloadavg()[0]:.2f} at the end, {os.cpu_count()} cores; now = {commit.stdout.strip()}"
        + (f", before = {args.base_label or args.base}" if args.base else ""),
        "",
        "| probe | " + " | ".join(checkouts) + (" | before / now |" if args.base else ""),
        "|---|" + "---:|" * (len(checkouts) + (1 if args.base else 0)),
    ]
    labels = {
        "serial": "TagContinuous-v0 serial twin (make, reset, step)",
        "team": "TagGridWorld-v0 thread team, 4,096 envs (make, reset, step)",
        "gpu": "TagContinuous-v0 kernels, sm_90a + sm_80 (kernelgym gpu-compile)",
    }
    for kind in args.probes:
        medians = {name: statistics.median(seconds[kind, name]) for name in checkouts}
        row = f"| {labels[kind]} | " + " | ".join(f"{medians[name]:.1f} s" for name in checkouts)
        if args.base:
            row += f" | {medians['before'] / medians['now']:.2f}x"
        lines.append(row + " |")
    RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
