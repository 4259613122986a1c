"""How long `kernelgym check ENV --backend cpu` takes: cold, after a one-line kernel edit, and
cold again with two busy processes on the machine (issue #39 item 5).

Each run is a fresh ``kernelgym check`` process, one numba thread per launch
(``KERNELGYM_CPU_THREADS=one``), with the caches (``NUMBA_CACHE_DIR``,
``KERNELGYM_CACHE_DIR``) of its own:

- ``cold``: empty caches;
- ``edit``: the example plugin's GoRight module copied to a temporary module, checked once
  (not timed), one line of its step kernel edited (the same values: the check still
  passes), and checked again with the caches of the first check (``module:attr``, through
  the kit's own command, ``python -m kernelgym.envs.testing.cli``, which ``kernelgym check``
  forwards to after refusing ids no plugin registers);
- ``busy``: ``cold`` while two busy-loop processes run.

``--kits current base`` measures this tree's kit and the kit of ``--base-ref`` (its
``packages/core/src`` and ``packages/envs/src``, extracted with ``git archive`` and put first
on ``PYTHONPATH``) in the same run, interleaved, so both see the same load. The table gives
the medians of ``--repeats`` rounds: wall seconds of the process and the seconds the
report says its checks took; under it, each round's busy wall over the same round's cold
wall and their median. Writes benchmarks/results/kit_time.md.

    .venv/bin/python benchmarks/bench_kit_time.py --repeats 1
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "kit_time.md"
GO_RIGHT = ROOT / "examples" / "kernelgym-example-plugin" / "src" / "kernelgym_example_plugin" / "go_right.py"
# the edit: the same observation (position >= 0, so adding 0.0 changes no bit), a new kernel source
EDIT_LINE = "    obs[i, 0] = position[i] / length\n"
EDITED_LINE = "    obs[i, 0] = position[i] / length + 0.0\n"
EDIT_MODULE = "kitbench_go_right"
# `kernelgym check` as the console script runs it (`console`); a base kit from before
# `exit_process` exits as its console script did
CLI = (
    "import sys; sys.argv[0] = 'kernelgym'; from kernelgym.cli.main import main\n"
    "try:\n    from kernelgym.core.process_exit import exit_process\n"
    "except ImportError:\n    exit_process = sys.exit\n"
    "exit_process(main())"
)
# `kernelgym check` takes registered ids; the kit's own command (which it forwards to) "module:attr" too
KIT_CLI = ["-m", "kernelgym.envs.testing.cli"]
CHECK_LINE = re.compile(r"\[[a-z ]+\] (\w+) +([0-9.]+) s")
REPORT_SECONDS = re.compile(r"seed \d+, ([0-9.]+) s")
COMPILE_LINE = re.compile(r"check (\w+) \(first run; cached afterwards\)\.\.\. ([0-9.]+) s")
SCENARIOS = ("cold", "edit", "busy")


def run_check(env_id: str, caches: Path, python_path: list[str]) -> dict:
    """One ``kernelgym check`` process: wall seconds, the report's seconds and its compile lines."""
    env = dict(
        os.environ,
        KERNELGYM_CPU_THREADS="one",
        NUMBA_CACHE_DIR=str(caches / "numba"),
        KERNELGYM_CACHE_DIR=str(caches / "kernelgym"),
        PYTHONPATH=os.pathsep.join([*python_path, *filter(None, [os.environ.get("PYTHONPATH")])]),
    )
    program = KIT_CLI if ":" in env_id else ["-c", CLI, "check"]
    command = [sys.executable, *program, env_id, "--backend", "cpu", "--seed", "1"]
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    output = done.stdout + done.stderr
    found = REPORT_SECONDS.search(output)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"kernelgym check {env_id} failed (exit {done.returncode}):\n{output}")
    compiles = [f"{check} {seconds} s" for check, seconds in COMPILE_LINE.findall(output)]
    checks = sorted(((float(seconds), name) for name, seconds in CHECK_LINE.findall(output)), reverse=True)
    slowest = [f"{name} {seconds:.1f} s" for seconds, name in checks[:4]]
    return {"wall": wall, "report": float(found.group(1)), "compiles": compiles, "slowest": slowest}


def edited_module(folder: Path) -> None:
    """Write GoRight's module as ``EDIT_MODULE`` in ``folder`` (unedited)."""
    source = GO_RIGHT.read_text()
    if EDIT_LINE not in source:
        raise RuntimeError(f"{GO_RIGHT}: the line to edit is gone: {EDIT_LINE!r}")
    (folder / f"{EDIT_MODULE}.py").write_text(source)


def measure(scenario: str, env_id: str, kit_path: list[str]) -> dict:
    with tempfile.TemporaryDirectory(prefix="kitbench-") as scratch:
        caches = Path(scratch)
        if scenario == "cold":
            return run_check(env_id, caches, kit_path)
        if scenario == "busy":
            busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
            try:
                return run_check(env_id, caches, kit_path)
            finally:
                for process in busy:
                    process.kill()
                    process.wait()
        modules = caches / "modules"
        modules.mkdir()
        edited_module(modules)
        target = f"{EDIT_MODULE}:SPEC"
        run_check(target, caches, [*kit_path, str(modules)])
        path = modules / f"{EDIT_MODULE}.py"
        path.write_text(path.read_text().replace(EDIT_LINE, EDITED_LINE, 1))
        shutil.rmtree(modules / "__pycache__", ignore_errors=True)
        return run_check(target, caches, [*kit_path, str(modules)])


def busy_ratios(runs: dict) -> list[str]:
    """Each round's busy wall over the same round's cold wall (the rounds interleave, so both
    saw the same machine), per env and kit: the lines under the table."""
    lines = []
    for (scenario, env_id, kit), busy in runs.items():
        cold = runs.get(("cold", env_id, kit))
        if scenario != "busy" or cold is None:
            continue
        ratios = [b["wall"] / c["wall"] for c, b in zip(cold, busy)]
        rounds = ", ".join(f"{ratio:.2f}" for ratio in ratios)
        lines.append(
            f"busy / cold wall, {env_id}, {kit} kit: median {statistics.median(ratios):.2f}x (rounds: {rounds})"
        )
    return [""] + lines if lines else []


def base_kit(ref: str, folder: Path) -> list[str]:
    """``ref``'s core and envs sources extracted into ``folder``: the PYTHONPATH entries that load them."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref, "packages/core/src", "packages/envs/src"],
        capture_output=True,
        check=True,
    )
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    return [str(folder / "packages" / "envs" / "src"), str(folder / "packages" / "core" / "src")]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=["GoRight-v0", "Ring-v0"], help="default: %(default)s")
    parser.add_argument("--scenarios", nargs="+", default=list(SCENARIOS), choices=SCENARIOS)
    parser.add_argument("--kits", nargs="+", default=["current"], choices=["current", "base"])
    parser.add_argument("--base-ref", default="main", help="git ref of the 'base' kit (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=1, help="interleaved rounds (default: %(default)s)")
    options = parser.parse_args(argv)
    if options.repeats < 1:
        parser.error(f"--repeats: expected an int >= 1, got {options.repeats}")
    base_commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", options.base_ref], capture_output=True, text=True, check=True
    ).stdout.strip()
    current_commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    load_before = os.getloadavg()
    runs: dict = {}
    with tempfile.TemporaryDirectory(prefix="kitbench-base-") as base_folder:
        paths = {"current": [], "base": base_kit(options.base_ref, Path(base_folder)) if "base" in options.kits else []}
        for _ in range(options.repeats):
            for scenario in options.scenarios:
                env_ids = ["GoRight-v0 (copy)"] if scenario == "edit" else options.envs
                for env_id in env_ids:
                    for kit in options.kits:
                        result = measure(scenario, env_id, paths[kit])
                        runs.setdefault((scenario, env_id, kit), []).append(result)
                        print(scenario, env_id, kit, result, f"load {os.getloadavg()[0]:.2f}", flush=True)
    kits = {
        "current": f"this tree ({current_commit}, uncommitted changes included)",
        "base": f"{options.base_ref} ({base_commit})",
    }
    lines = [
        f"`kernelgym check ENV --backend cpu --seed 1`, KERNELGYM_CPU_THREADS=one, a fresh process per run, "
        f"median of {options.repeats} interleaved round(s); load average {load_before[0]:.2f} at the start, "
        f"{os.getloadavg()[0]:.2f} at the end; {os.cpu_count()} cores. Kits: "
        + "; ".join(f"{kit} = {kits[kit]}" for kit in options.kits)
        + ".",
        "",
        "| scenario | env | kit | wall | checks (report) | compiling checks | slowest checks |",
        "|---|---|---|---:|---:|---|---|",
    ]
    for (scenario, env_id, kit), results in runs.items():
        wall = statistics.median(result["wall"] for result in results)
        report = statistics.median(result["report"] for result in results)
        compiles = "; ".join(results[-1]["compiles"]) or "none"
        slowest = "; ".join(results[-1]["slowest"])
        lines.append(f"| {scenario} | {env_id} | {kit} | {wall:.1f} s | {report:.1f} s | {compiles} | {slowest} |")
    lines += busy_ratios(runs)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
