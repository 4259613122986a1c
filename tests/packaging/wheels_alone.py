"""Each wheel installed alone in a fresh venv runs its README's first Python example.

"Alone" means the wheel, its declared dependencies from the package index (torch pinned to
the CPU build through constraints.txt) and the wheels of the kernelgym siblings it declares,
nothing else: a dependency a package uses but does not declare fails here.

    python tests/packaging/wheels_alone.py [--only kernelgym-core,kernelgym-memory] [--keep DIR]

Run by ``tox -e wheels``. Exits non-zero if any example fails, naming it.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {
    "kernelgym-core": ROOT / "packages" / "core",
    "kernelgym-memory": ROOT / "packages" / "memory",
    "kernelgym-collectors": ROOT / "packages" / "collectors",
    "kernelgym-envs": ROOT / "packages" / "envs",
    "kernelgym-minatar": ROOT / "packages" / "minatar",
    "kernelgym": ROOT,
}
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def first_example(readme: Path) -> str:
    """The first fenced ```python block of a README."""
    match = FENCE.search(readme.read_text())
    if match is None:
        raise SystemExit(f"{readme}: no ```python block to run")
    return match.group(1)


def siblings(name: str) -> set[str]:
    """The kernelgym distributions ``name`` needs, itself included, through required dependencies."""
    needed, pending = set(), [name]
    while pending:
        current = pending.pop()
        if current in needed:
            continue
        needed.add(current)
        project = tomllib.loads((FOLDERS[current] / "pyproject.toml").read_text())["project"]
        for text in project.get("dependencies", []):
            requirement = canonicalize_name(Requirement(text).name)
            if requirement in FOLDERS:
                pending.append(requirement)
    return needed


def run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(command, check=False, capture_output=True, text=True, **kwargs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(FOLDERS), help="comma-separated distributions")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    args = parser.parse_args(argv)
    chosen = [canonicalize_name(name) for name in args.only.split(",") if name]
    unknown = [name for name in chosen if name not in FOLDERS]
    if unknown:
        parser.error(f"--only: expected names among {sorted(FOLDERS)}, got {unknown}")
    if args.keep:
        return check(chosen, args.keep, keep=True)
    with tempfile.TemporaryDirectory(prefix="wheels-alone-") as work:
        return check(chosen, Path(work), keep=False)


def check(chosen: list[str], work: Path, keep: bool) -> int:
    """Build the wheels into ``work``, then install and run each chosen one alone; 0 if all ran."""
    wheels = work / "wheels"
    built = run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--wheel-dir",
            str(wheels),
            *(str(folder) for folder in FOLDERS.values()),
        ]
    )
    if built.returncode:
        print(built.stdout, built.stderr, file=sys.stderr)
        return 1
    wheel_of = {name: next(wheels.glob(name.replace("-", "_") + "-*.whl")) for name in FOLDERS}
    failures = []
    for name in chosen:
        start = time.perf_counter()
        venv = work / f"venv-{name}"
        python = venv / "bin" / "python"
        # uv (the env's `uv` package) makes the venv and installs: seconds where pip takes a
        # minute or two for torch; it resolves the wheels' declared dependencies as pip does
        uv = [sys.executable, "-m", "uv"]
        steps = [
            [*uv, "venv", "--quiet", "--python", sys.executable, str(venv)],
            [
                *uv,
                "pip",
                "install",
                "--quiet",
                "--python",
                str(python),
                "-c",
                str(ROOT / "constraints.txt"),
                *(str(wheel_of[sibling]) for sibling in sorted(siblings(name))),
            ],
        ]
        example = work / f"example-{name}.py"
        example.write_text(first_example(FOLDERS[name] / "README.md"))
        env = dict(
            os.environ,
            KERNELGYM_CACHE_DIR=str(work / "kernelgym-cache"),
            NUMBA_CACHE_DIR=str(work / "numba-cache"),
            PYTHONPATH="",
        )
        steps.append([str(python), str(example)])
        for step in steps:
            result = run(step, cwd=work, env=env, timeout=900)
            if result.returncode:
                failures.append(name)
                print(f"FAIL {name}: {' '.join(step[:4])} ...\n{result.stdout}{result.stderr}", file=sys.stderr)
                break
        else:
            print(f"ok   {name}: installed alone, README's first example ran ({time.perf_counter() - start:.0f} s)")
        if not keep:  # a venv with torch is about 1 GB: one at a time on disk
            shutil.rmtree(venv, ignore_errors=True)
    if failures:
        print(f"{len(failures)} of {len(chosen)} failed: {', '.join(failures)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
