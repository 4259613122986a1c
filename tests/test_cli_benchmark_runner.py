"""benchmarks/run_all.py: runs the bench scripts, notes failures, assembles BENCHMARKS.md.

The runner is copied next to throwaway bench scripts in a temporary directory, so
these tests never touch the repository's real results.
"""

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

RUNNER = Path(__file__).resolve().parents[1] / "benchmarks" / "run_all.py"


def write_script(folder: Path, name: str, body: str) -> None:
    (folder / f"bench_{name}.py").write_text(textwrap.dedent(body))


def writes_section(name: str, marker: Path) -> str:
    return f"""
        from pathlib import Path
        Path({str(marker)!r}).write_text("ran")
        results = Path(__file__).parent / "results"
        results.mkdir(exist_ok=True)
        (results / "{name}.md").write_text("## {name}\\n\\n| n | steps/s |\\n|---|---|\\n| 1 | 42 |\\n")
    """


@pytest.fixture
def workspace(tmp_path):
    benchmarks = tmp_path / "benchmarks"
    benchmarks.mkdir()
    shutil.copy(RUNNER, benchmarks / "run_all.py")
    write_script(benchmarks, "envs", writes_section("envs", tmp_path / "envs.ran"))
    write_script(benchmarks, "memory", writes_section("memory", tmp_path / "memory.ran"))
    write_script(benchmarks, "rollouts", "raise SystemExit(3)\n")
    return tmp_path


def run_all(workspace: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(workspace / "benchmarks" / "run_all.py"), *args],
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_runs_every_script_and_reports_failures(workspace):
    completed = run_all(workspace)
    assert completed.returncode == 1  # bench_rollouts.py failed
    text = (workspace / "BENCHMARKS.md").read_text()
    for heading in ("## Machine", "## GPU", "## envs", "## memory", "## rollouts"):
        assert heading in text
    assert "| 1 | 42 |" in text
    assert "`bench_rollouts.py` failed (exit code 3)" in text
    for line in ("- CPU:", "- Memory:", "- Date:", "torch ", "numba ", "gymnasium ", "python "):
        assert line in text
    # section order follows the runner's order: (core), envs, memory, (vector_tasks), rollouts
    assert text.index("## envs") < text.index("## memory") < text.index("## rollouts")
    assert (workspace / "benchmarks" / "results" / "machine.md").is_file()


def test_only_runs_the_named_scripts_and_assemble_only_runs_nothing(workspace):
    completed = run_all(workspace, "--only", "memory")
    assert completed.returncode == 0, completed.stderr
    assert (workspace / "memory.ran").exists() and not (workspace / "envs.ran").exists()
    text = (workspace / "BENCHMARKS.md").read_text()
    assert "## memory" in text and "Not measured yet: run `python benchmarks/run_all.py --only envs`" in text

    (workspace / "memory.ran").unlink()
    completed = run_all(workspace, "--assemble-only", "--output", str(workspace / "OUT.md"))
    assert completed.returncode == 0, completed.stderr
    assert not (workspace / "memory.ran").exists()  # nothing ran ...
    text = (workspace / "OUT.md").read_text()
    assert "| 1 | 42 |" in text and "## Machine" in text  # ... and the kept results were assembled


def test_unknown_script_name_is_a_clear_error(workspace):
    completed = run_all(workspace, "--only", "gpus")
    assert completed.returncode == 2
    assert "argument --only" in completed.stderr and "'gpus'" in completed.stderr
    assert "envs" in completed.stderr  # the valid choices are named
