"""Issue 25 class 7: the command's output files never lose a run's result.

Paths are proven writable by opening them before any work; a folder removed during a run
is made again; a file that cannot be written at the end comes after the printed result,
as a one-line error (exit code 1) and a copy in a temporary folder, never a traceback.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelgym.cli.main import main
from kernelgym.cli.outputs import save_output, write_problem

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run(capsys, *argv):
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = exit_.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("command", [["demo", "--out"], ["bench", "CartPole-v1", "--backend", "cpu", "--plot"]])
def test_a_path_os_access_calls_writable_but_that_cannot_be_written_is_refused_before_any_work(capsys, command):
    # as root, os.access says yes to /proc; opening the file says no
    code, out, err = run(capsys, *command, "/proc/kernelgym-out.png")
    assert code == 2 and out == ""
    assert f"argument {command[-1]}: expected a writable .png file path (cannot write it:" in " ".join(err.split())


def test_write_problem_leaves_an_existing_file_unchanged_and_no_new_file_behind(tmp_path):
    existing = tmp_path / "old.png"
    existing.write_bytes(b"keep me")
    assert write_problem(str(existing)) is None and existing.read_bytes() == b"keep me"
    assert write_problem(str(tmp_path / "new.png")) is None and not (tmp_path / "new.png").exists()
    assert "cannot write it" in write_problem(str(tmp_path / "no-folder" / "x.png"))


def test_save_output_makes_a_removed_folder_again(tmp_path, capsys):
    path = tmp_path / "gone" / "plot.png"
    assert save_output(lambda p: Path(p).write_bytes(b"data"), str(path), "--out", "demo", "learning curve")
    assert path.read_bytes() == b"data"
    assert "was removed during the run; made it again" in capsys.readouterr().err


def test_save_output_that_cannot_write_writes_a_copy_elsewhere_and_says_so_in_one_line(tmp_path, capsys):
    blocker = tmp_path / "was-a-folder"
    blocker.write_text("a file where the folder was")
    path = blocker / "plot.png"
    assert not save_output(lambda p: Path(p).write_bytes(b"data"), str(path), "--plot", "bench", "plot")
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"kernelgym bench: error: argument --plot: could not write {str(path)!r}")
    fallback = line.split("the plot was written to ")[1].split("'")[1]
    assert Path(fallback).read_bytes() == b"data"
    shutil.rmtree(os.path.dirname(fallback))


def bench_while(tmp_path, change):
    """Run `kernelgym bench --plot <folder>/plot.png` and ``change(folder)`` once it measures."""
    folder = tmp_path / "out"
    folder.mkdir()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kernelgym.cli",
            "bench",
            "CartPole-v1",
            "--num-envs",
            "16",
            "--steps",
            "10000",
            "--repeats",
            "1",
            "--backend",
            "cpu",
            "--no-gymnasium",
            "--plot",
            str(folder / "plot.png"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    seen = ""
    while "bench CartPole-v1" not in seen:  # tqdm's bar: the command is measuring
        chunk = os.read(process.stderr.fileno(), 4096).decode()
        assert chunk or process.poll() is None, seen
        seen += chunk
    change(folder)
    out, err = process.communicate(timeout=300)
    return process.returncode, out, seen + err, folder


def test_bench_whose_output_folder_is_removed_mid_run_writes_its_plot_anyway(tmp_path):
    code, out, err, folder = bench_while(tmp_path, shutil.rmtree)
    assert code == 0, err
    assert "Traceback" not in err and "made it again" in err
    assert (folder / "plot.png").read_bytes().startswith(PNG_MAGIC)
    assert "env-steps/s" in out or "kernelgym (cpu)" in out


def test_bench_whose_plot_cannot_be_written_prints_its_table_then_one_error_line(tmp_path):
    def replace_by_a_file(folder):
        shutil.rmtree(folder)
        folder.write_text("not a folder any more")

    code, out, err, folder = bench_while(tmp_path, replace_by_a_file)
    assert code == 1
    assert "Traceback" not in err
    assert "kernelgym (cpu)" in out  # the measured table came first
    (line,) = [line for line in err.splitlines() if "error:" in line]
    assert f"argument --plot: could not write {str(folder / 'plot.png')!r}" in line
    fallback = line.split("the plot was written to ")[1].split("'")[1]
    with open(fallback, "rb") as file:
        assert file.read(8) == PNG_MAGIC
    shutil.rmtree(os.path.dirname(fallback))
