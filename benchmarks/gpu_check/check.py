"""The whole GPU check in one command: tests, sanitizers, sync counts and benchmarks.

    python benchmarks/gpu_check/check.py --out DIR                  # on a GPU machine
    python benchmarks/gpu_check/check.py --out DIR --backend cpu --tiny   # the code path, anywhere

`run.sh` installs kernelgym from a wheelhouse first (an air-gapped GPU machine); this
script then runs each step in its own process with a time limit, appends every result
to ``DIR/results.jsonl`` the moment it is measured (a step that crashes or times out
keeps what it printed), keeps each step's log as ``DIR/logs/<step>.log`` (``--logs``), and
prints a short table last (also ``DIR/summary.md``). Correctness comes first, throughput
after it, so that a run cut short by ``--budget`` loses the numbers an earlier run already
has, not the checks. The timed steps run alone, one after the other; the correctness steps
of 4 run at the same time. The steps:

1. ``info``: versions and the device; ``rounding``: each backend's affine kernel and
   float32 draws against numpy's two roundings, with fma counts and each launcher's LTO flag.
2. ``parity``: cpu against cuda trajectories (4 classic envs, float64 and float32);
   ``launch_parity``: numba-cuda's launch against the prebuilt one, bit for bit, with the
   launch path each env took.
3. ``sync``: host synchronizations per ``step()`` (classic, Tag, Dict observations, per-env
   params, packed agent blocks, MinAtar) and per collector fragment.
4. ``kit``: the property-test kit on the backend for every checked env
   (``parts.checked_env_ids``); ``pytest``: the ``gpu``-marked tests of every package;
   ``doc-examples-gpu``: the docs' GPU-only blocks; ``memcheck``, ``racecheck``:
   compute-sanitizer over a short run of every checked env.
5. ``launch_paths``: host us per CartPole step by launch path, check on and off
   (benchmarks/bench_launch.py); ``fragments``: captured 16-step fragments against eager
   ones (fragments.py); ``tag_baseline``: TagGridWorld with WarpDrive's partial observation
   against a hand-written CUDA C kernel, equal over 100 steps, then timed (tag_baseline.py);
   ``tag`` (WarpDrive's scale, packed agent blocks against one env per block),
   ``bandwidth``, ``cartpole``, ``launch`` (and CUDA-graph replay), ``collector``: throughput.
6. ``demo``, ``demo-cpu``: ``kernelgym demo`` to a mean return of 475 on the backend, then
   on the cpu (not in ``--tiny``: the offline venv it proves has no matplotlib).

The whole run stops starting new steps when ``--budget`` seconds are spent. Every line of
``results.jsonl`` carries the commit measured: ``KERNELGYM_COMMIT``, else the wheelhouse's
``COMMIT`` file (wheelhouse.sh writes it; run.sh exports it), else ``git rev-parse``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PARTS = HERE / "parts.py"


# steps that only check correctness run at the same time (after the timed checks, before the
# throughput): they share the CPU cores (compiling) and barely use the GPU
TOGETHER = ("kit", "pytest", "doc-examples-gpu", "memcheck", "racecheck", "short_run")


def steps(backend: str, tiny: bool, workers: int) -> list[tuple[str, list[str], int]]:
    """``(name, command, time limit in seconds)`` of each step, in order."""
    python = [sys.executable, "-u"]
    part = [*python, str(PARTS)]
    flags = ["--backend", backend] + (["--tiny"] if tiny else [])

    def part_steps(*names_and_limits):
        return [(name, [*part, name, *flags], limit) for name, limit in names_and_limits]

    checks = part_steps(("info", 60), ("rounding", 60), ("parity", 120), ("launch_parity", 120), ("sync", 120))
    throughput = part_steps(
        ("launch_paths", 120),
        ("fragments", 120),
        ("tag_baseline", 180),
        ("tag", 240),
        ("bandwidth", 30),
        ("cartpole", 90),
        ("launch", 60),
        ("collector", 60),
    )
    kit = ("kit", [*part, "kit", *flags], 300)
    if backend == "cuda":
        tests = [str(ROOT / "packages" / name / "tests") for name in ("core", "envs", "memory", "collectors")]
        marks = "gpu"
    else:  # no GPU: one quick cpu file proves the tests run against the installed wheels
        tests, marks = [str(ROOT / "packages" / "core" / "tests" / "test_core_kernels.py")], "not sim"
    parallel = ["-n", str(max(1, workers // 2))] if workers > 1 and _has_xdist() else []
    pytest = (
        "pytest",
        [
            *python,
            "-m",
            "pytest",
            *tests,
            "-m",
            marks,
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(ROOT),
            "--timeout",
            "240",
            *parallel,
        ],
        240,
    )
    result = [*checks, kit, pytest]
    if backend == "cuda":  # the README and docs blocks that need a GPU (a CUDA graph); CI has none
        doc_examples = [str(ROOT / "tests" / "test_doc_examples.py"), "-q", "-p", "no:cacheprovider"]
        gpu_blocks = ["env", "KERNELGYM_DOC_EXAMPLES=gpu", *python, "-m", "pytest", *doc_examples]
        result.append(("doc-examples-gpu", [*gpu_blocks, "--rootdir", str(ROOT), "--timeout", "240"], 120))
    sanitizer = shutil.which("compute-sanitizer") or next(
        (str(path) for path in sorted(Path("/usr/local").glob("cuda*/bin/compute-sanitizer"))), None
    )
    short_run = [*part, "short_run", *flags]
    if backend == "cuda" and sanitizer:
        for tool in ("memcheck", "racecheck"):
            result.append(
                (tool, [sanitizer, "--tool", tool, "--error-exitcode", "3", "--print-limit", "20", *short_run], 150)
            )
    else:
        result.append(("short_run", short_run, 120))
    result += throughput
    demo = [
        *python,
        "-m",
        "kernelgym.cli.main",
        "demo",
        "--no-progress",
        "--seed",
        "1",
        "--out",
        "demo-learning-curve.png",
        "--time-limit",
        "100",
    ]
    if not tiny:  # the tiny path's venv has no matplotlib (the demo plots)
        result.append(("demo", [*demo, "--backend", backend], 120))
        result.append(("demo-cpu", [*demo, "--backend", "cpu"], 120))
    return result


class _LockedWriter:
    """A results file that several step threads append whole lines to."""

    def __init__(self, file):
        self._file, self._lock = file, threading.Lock()

    def write(self, text: str) -> None:
        with self._lock:
            self._file.write(text)

    def flush(self) -> None:
        with self._lock:
            self._file.flush()


def _has_xdist() -> bool:
    try:
        import xdist  # noqa: F401
    except ImportError:
        return False
    return True


def run_step(name: str, command: list[str], limit: float, logs: Path, results) -> dict:
    """Run one step in ``logs``; copy its JSON lines to ``results`` as they come; return its summary."""
    started = time.perf_counter()
    log_path = logs / f"{name}.log"
    lines = 0
    with open(log_path, "w") as log:
        log.write("$ " + " ".join(command) + "\n")
        log.flush()
        process = subprocess.Popen(
            command,
            cwd=logs,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=True,
        )
        deadline = started + limit
        timed_out = False
        try:
            for line in _lines_until(process, deadline):
                log.write(line)
                log.flush()
                if line.startswith("{") and '"part"' in line:
                    results.write(line)
                    results.flush()
                    lines += 1
        except TimeoutError:
            timed_out = True
            os.killpg(process.pid, 9)
        code = process.wait()
    seconds = time.perf_counter() - started
    summary = {
        "part": "step",
        "commit": os.environ["KERNELGYM_COMMIT"],
        "step": name,
        "exit_code": code,
        "timed_out": timed_out,
        "seconds": round(seconds, 1),
        "results": lines,
        "tail": _tail(log_path),
    }
    results.write(json.dumps(summary) + "\n")
    results.flush()
    status = "TIMEOUT" if timed_out else ("ok" if code == 0 else f"exit {code}")
    print(f"[{time.strftime('%H:%M:%S')}] {name}: {status} in {seconds:.0f} s ({lines} results)", flush=True)
    return summary


def _lines_until(process, deadline: float):
    import selectors

    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    while True:
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            raise TimeoutError
        if selector.select(timeout=min(remaining, 1.0)):
            line = process.stdout.readline()
            if not line:
                return
            yield line
        elif process.poll() is not None:
            rest = process.stdout.read()
            if rest:
                yield from rest.splitlines(keepends=True)
            return


def _tail(path: Path, lines: int = 6) -> str:
    return "".join(path.read_text(errors="replace").splitlines(keepends=True)[-lines:])[-800:]


def summary_table(path: Path) -> str:
    """A short markdown table of every result line."""
    rows = ["| step | result |", "|---|---|"]
    for line in path.read_text().splitlines():
        record = json.loads(line)
        part = record.pop("part")
        if part == "step":
            status = "timed out" if record["timed_out"] else f"exit {record['exit_code']}"
            rows.append(f"| **{record['step']}** | {status}, {record['seconds']} s, {record['results']} results |")
            continue
        record.pop("report", None)
        record.pop("first", None)
        text = ", ".join(f"{key}={_short(value)}" for key, value in record.items())
        rows.append(f"| {part} | {text} |")
    return "\n".join(rows)


def _short(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    text = str(value).replace("|", "/").replace("\n", " ")
    return text if len(text) <= 160 else text[:157] + "..."


def measured_commit() -> str:
    """The commit this check measures: git's, where the tree is a clone, else "unknown"."""
    try:
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("-dirty" if dirty else "")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for results.jsonl and summary.md")
    parser.add_argument(
        "--logs", type=Path, default=None, help="folder for each step's log and files (default: OUT/logs)"
    )
    parser.add_argument("--backend", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--tiny", action="store_true", help="tiny sizes: check the code path")
    parser.add_argument("--budget", type=float, default=540.0, help="seconds; no step starts after (%(default)s)")
    parser.add_argument("--only", default="", help="comma-separated step names to run (default: all)")
    parser.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1), help="pytest-xdist workers")
    options = parser.parse_args(argv)
    started = time.perf_counter()
    out = options.out.resolve()
    logs = (options.logs or out / "logs").resolve()
    logs.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    # every step shares one compile cache: a kernel compiled by one step is loaded by the next
    cache = out.parent / f".{out.name}-cache"
    os.environ.setdefault("NUMBA_CACHE_DIR", str(cache / "numba"))
    os.environ.setdefault("KERNELGYM_CACHE_DIR", str(cache / "kernelgym"))
    os.environ.setdefault("KERNELGYM_COMMIT", measured_commit())
    wanted = {name.strip() for name in options.only.split(",") if name.strip()}
    results_path = out / "results.jsonl"
    os.environ["GPU_CHECK_JOBS"] = str(max(1, options.workers // 2))
    planned = [
        step for step in steps(options.backend, options.tiny, options.workers) if not wanted or step[0] in wanted
    ]
    with open(results_path, "a") as file:
        results = _LockedWriter(file)
        index = 0
        while index < len(planned):
            group = [planned[index]]
            while (
                group[0][0] in TOGETHER
                and index + len(group) < len(planned)
                and planned[index + len(group)][0] in TOGETHER
            ):
                group.append(planned[index + len(group)])
            index += len(group)
            left = options.budget - (time.perf_counter() - started)
            if left < 15:
                for name, _, _ in group:
                    results.write(
                        json.dumps(
                            {
                                "part": "step",
                                "step": name,
                                "exit_code": None,
                                "timed_out": False,
                                "seconds": 0,
                                "results": 0,
                                "tail": "not started: budget spent",
                            }
                        )
                        + "\n"
                    )
                    print(f"{name}: not started (budget spent)", flush=True)
                continue
            threads = [
                threading.Thread(target=run_step, args=(name, command, min(limit, left), logs, results))
                for name, command, limit in group
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    table = summary_table(results_path)
    (out / "summary.md").write_text(table + "\n")
    print("\n" + table)
    failed = [json.loads(line) for line in results_path.read_text().splitlines()]
    bad = [r for r in failed if r["part"] == "step" and (r["timed_out"] or r["exit_code"] not in (0, None))]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
