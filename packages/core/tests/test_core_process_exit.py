"""`exit_process`: a command's exit code, with its atexit handlers and finally blocks run."""

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import atexit, gc
    from kernelgym.core.process_exit import exit_process

    atexit.register(print, "atexit ran")
    try:
        exit_process({code})
    finally:
        print("finally ran", gc.get_freeze_count() > 0)
    """
)


def test_exit_process_exits_with_the_code_after_atexit_handlers_and_finally_blocks():
    for code in (0, 3):
        script = SCRIPT.format(code=code)
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        assert done.returncode == code, done.stderr
        assert done.stdout.splitlines() == ["finally ran True", "atexit ran"]
