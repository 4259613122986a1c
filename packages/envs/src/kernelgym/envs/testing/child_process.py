"""The kit's child processes: the ``gpu_compile`` check's and a check run beside the others.

Each runs ``python -m MODULE ...`` with this process's import path (a test module's specs, for
one) and writes its stderr to ``FOLDER/stderr.txt``: a pipe nobody reads while the other checks
run would stall the child once full.
"""

from __future__ import annotations

import os
import subprocess
import sys

__all__ = ["read_stderr", "start_child", "stop_child"]


def start_child(module: str, arguments: list[str], folder: str, environment: dict) -> subprocess.Popen:
    """Start ``python -m module *arguments`` with ``environment`` and this process's import path."""
    environment = {**environment, "PYTHONPATH": os.pathsep.join(path for path in sys.path if path)}
    with open(os.path.join(folder, "stderr.txt"), "w") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", module, *arguments], env=environment, stdout=subprocess.DEVNULL, stderr=stderr
        )


def read_stderr(folder: str) -> str:
    """What the child started in ``folder`` wrote to stderr."""
    with open(os.path.join(folder, "stderr.txt")) as file:
        return file.read()


def stop_child(process: subprocess.Popen) -> None:
    """Kill the child if it still runs, and reap it."""
    if process.poll() is None:
        process.kill()
        process.wait()
