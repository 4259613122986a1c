"""Run the benchmark scripts and assemble BENCHMARKS.md at the repository root.

Each script ``benchmarks/bench_<name>.py`` measures one part and writes its results as
a markdown section to ``benchmarks/results/<name>.md``. This runner runs them (all, or
the ones named with ``--only``), records the machine they ran on in
``benchmarks/results/machine.md`` and assembles everything into ``BENCHMARKS.md``:
the machine (CPU model, cores, memory, GPU), the date, the library versions, then
each script's section.

Usage::

    python benchmarks/run_all.py                      # run every script, assemble
    python benchmarks/run_all.py --only envs memory   # run these two, assemble all
    python benchmarks/run_all.py --assemble-only      # re-assemble from results/
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent
RESULTS = BENCHMARKS / "results"
REPO_ROOT = BENCHMARKS.parent
MACHINE_FILE = RESULTS / "machine.md"
# the order of the sections in BENCHMARKS.md; other bench_*.py scripts follow by name
PREFERRED_ORDER = ("core", "envs", "memory", "vector_tasks", "rollouts")
VERSIONED = ("python", "numpy", "numba", "numba-cuda", "torch", "gymnasium", "kernelgym")


# ------------------------------------------------------------------------- scripts
def discover_scripts() -> dict[str, Path]:
    """``{name: path}`` of every ``benchmarks/bench_<name>.py``, in section order."""
    found = {path.stem.removeprefix("bench_"): path for path in BENCHMARKS.glob("bench_*.py")}
    order = [name for name in PREFERRED_ORDER if name in found] + sorted(set(found) - set(PREFERRED_ORDER))
    return {name: found[name] for name in order}


def run_script(name: str, script: Path, timeout_s: float, python: str, extra_args: list[str]) -> str | None:
    """Run one script from the repository root; return None on success, else why it failed."""
    command = [python, str(script), *extra_args]
    print(f"\n=== {name}: {shlex.join(command)}", flush=True)
    start = time.perf_counter()
    try:
        completed = subprocess.run(command, cwd=REPO_ROOT, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return f"timed out after {timeout_s:.0f} s"
    print(f"=== {name}: exit code {completed.returncode} after {time.perf_counter() - start:.1f} s", flush=True)
    if completed.returncode != 0:
        return f"exit code {completed.returncode}"
    if not (RESULTS / f"{name}.md").is_file():
        return f"it wrote no {(RESULTS / f'{name}.md').relative_to(REPO_ROOT)}"
    return None


# ------------------------------------------------------------------------- machine
def cpu_model() -> str:
    """The CPU model name (from /proc/cpuinfo on Linux)."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def memory_gib() -> float | None:
    """Total RAM in GiB, when the OS reports it."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        return None


def load_average() -> str:
    """The 1-minute load average, when the OS reports it."""
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except (OSError, AttributeError):
        return "unknown"


def version(distribution: str) -> str:
    if distribution == "python":
        return platform.python_version()
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def gpu_lines() -> list[str]:
    """Markdown lines describing the usable CUDA GPUs, or saying that none was present."""
    try:
        from numba import cuda

        if not cuda.is_available():
            return [
                "No usable CUDA GPU was present: the sections below ran on the CPU backend (`auto` resolved to `cpu`)."
            ]
        lines = []
        for gpu in cuda.gpus:
            with gpu:
                device = cuda.get_current_device()
                free, total = cuda.current_context().get_memory_info()
                name = device.name.decode() if isinstance(device.name, bytes) else device.name
                lines.append(
                    f"- GPU {device.id}: {name}, compute capability "
                    f"{'.'.join(map(str, device.compute_capability))}, {total / 2**30:.1f} GiB"
                )
        runtime = ".".join(map(str, cuda.runtime.get_version()))
        lines.append(f"- CUDA runtime {runtime}; the sections below ran with `auto` resolved to `cuda`.")
        return lines
    except Exception as error:
        return [f"No usable CUDA GPU was present (probing failed: {type(error).__name__}: {error})."]


def describe_machine() -> str:
    """The machine section: CPU, cores, memory, OS, date, versions and GPU."""
    memory = memory_gib()
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "## Machine",
        "",
        f"- Date: {now}",
        f"- CPU: {cpu_model()}, {os.cpu_count()} logical cores",
        f"- Memory: {memory:.1f} GiB" if memory else "- Memory: unknown",
        f"- OS: {platform.platform()}",
        f"- Load average when recorded: {load_average()} (near or above {os.cpu_count()}, the core count, means "
        "other jobs shared the machine; each section gives its own)",
        "- Versions: " + ", ".join(f"{name} {version(name)}" for name in VERSIONED),
        "",
        "## GPU",
        "",
        *gpu_lines(),
        "",
    ]
    return "\n".join(lines)


# ------------------------------------------------------------------------ assemble
def assemble(output: Path, failures: dict[str, str]) -> str:
    """Write ``output`` from results/machine.md and every results/<name>.md; return the text."""
    machine = MACHINE_FILE.read_text() if MACHINE_FILE.is_file() else describe_machine()
    parts = [
        "# kernelgym benchmarks",
        "",
        "Assembled by `python benchmarks/run_all.py` from `benchmarks/results/`; each section "
        "is written by its script `benchmarks/bench_<name>.py`. Medians over repeats; "
        "ratios are kernelgym over the baseline named in the section.",
        "",
        machine.rstrip(),
        "",
    ]
    names = list(discover_scripts())
    names += sorted(path.stem for path in RESULTS.glob("*.md") if path.stem not in names and path != MACHINE_FILE)
    for name in names:
        section = RESULTS / f"{name}.md"
        if name in failures:
            parts += [f"## {name}", "", f"Not measured: `bench_{name}.py` failed ({failures[name]}).", ""]
        elif section.is_file():
            parts += [section.read_text().rstrip(), ""]
        else:
            parts += [f"## {name}", "", f"Not measured yet: run `python benchmarks/run_all.py --only {name}`.", ""]
    text = "\n".join(parts)
    output.write_text(text)
    return text


def name_value(text: str) -> tuple[str, str]:
    """argparse type: ``NAME=VALUE``."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, received {text!r}")
    return name, value


def build_parser(scripts: dict[str, Path]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="NAME",
        choices=list(scripts),
        help=f"run only these scripts (names: {', '.join(scripts)})",
    )
    parser.add_argument(
        "--assemble-only", action="store_true", help="run nothing; re-assemble BENCHMARKS.md from benchmarks/results/"
    )
    parser.add_argument(
        "--timeout", type=float, default=1800.0, metavar="SECONDS", help="per-script time limit (default: %(default)s)"
    )
    parser.add_argument(
        "--python",
        action="append",
        default=[],
        metavar="NAME=PYTHON",
        type=name_value,
        help="run script NAME with this interpreter, e.g. memory=.venv-bench/bin/python "
        "(a venv that also holds the peer libraries); repeatable",
    )
    parser.add_argument(
        "--args",
        action="append",
        default=[],
        metavar="NAME=ARGS",
        type=name_value,
        help="extra arguments for script NAME, e.g. 'envs=--envpool-python .venv-envpool/bin/python'; repeatable",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=REPO_ROOT / "BENCHMARKS.md",
        help="where to write the assembled file (default: %(default)s)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    scripts = discover_scripts()
    args = build_parser(scripts).parse_args(argv)
    for name, _ in args.python + args.args:
        if name not in scripts:
            raise SystemExit(
                f"run_all.py: --python/--args name {name!r} is not a script (expected one of {list(scripts)})"
            )
    pythons = dict(args.python)
    extra_args = {name: shlex.split(value) for name, value in args.args}
    RESULTS.mkdir(exist_ok=True)
    failures: dict[str, str] = {}
    if not args.assemble_only:
        MACHINE_FILE.write_text(describe_machine())
        for name in args.only or scripts:
            failure = run_script(
                name, scripts[name], args.timeout, pythons.get(name, sys.executable), extra_args.get(name, [])
            )
            if failure:
                failures[name] = failure
                print(f"=== {name} FAILED: {failure}", file=sys.stderr, flush=True)
    print(assemble(args.output, failures))
    print(f"\nwrote {args.output}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
