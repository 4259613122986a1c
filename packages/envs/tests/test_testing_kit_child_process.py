"""The kit's forked children (`kernelgym.envs.testing.child_process.fork_child`): exit codes, errors,
output kept apart from the parent's, and where this process refuses to fork."""

import os
import subprocess
import sys
import threading
import time

import pytest

from kernelgym.envs.testing.child_process import ForkedChild, fork_child, fork_refusal, read_stderr

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kit forks its children on Linux only")


def _write(path, text):
    with open(path, "w") as file:
        file.write(text)


def test_a_forked_child_runs_the_work_and_exits_0(tmp_path):
    child = fork_child(lambda: _write(tmp_path / "out.txt", f"from {os.getpid()}"), str(tmp_path))
    assert isinstance(child, ForkedChild) and child.wait(timeout=60) == 0
    assert (tmp_path / "out.txt").read_text() == f"from {child.pid}"  # it ran in the child, not here
    assert child.poll() == 0


def test_a_system_exit_gives_its_code_and_an_error_its_traceback_on_stderr(tmp_path):
    def fail():
        raise ValueError("the work broke")

    assert fork_child(lambda: exec("raise SystemExit(3)"), str(tmp_path)).wait(timeout=60) == 3
    assert fork_child(fail, str(tmp_path)).wait(timeout=60) == 1
    stderr = read_stderr(str(tmp_path))
    assert "Traceback" in stderr and "ValueError: the work broke" in stderr


def test_the_childs_output_goes_to_its_files_not_the_parents_streams(tmp_path, capfd):
    def noisy():
        print("to stdout")
        os.write(2, b"to fd 2\n")

    assert fork_child(noisy, str(tmp_path)).wait(timeout=60) == 0
    captured = capfd.readouterr()
    assert "to stdout" not in captured.out and "to fd 2" not in captured.err
    assert read_stderr(str(tmp_path)) == "to fd 2\n"


def test_a_child_past_its_wait_raises_timeout_and_kill_ends_it(tmp_path):
    child = fork_child(lambda: time.sleep(60), str(tmp_path))
    with pytest.raises(subprocess.TimeoutExpired):
        child.wait(timeout=0.2)
    child.kill()
    assert child.wait(timeout=60) == -9
    child.kill()  # ended already: nothing to do


def test_a_process_running_another_thread_refuses_to_fork():
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert fork_refusal() == "2 threads run in this process"
    finally:
        stop.set()
        thread.join()
    assert fork_refusal() is None
