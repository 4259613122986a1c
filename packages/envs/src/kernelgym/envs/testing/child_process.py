"""The kit's child processes: the ``gpu_compile`` check's and the checks run beside the others.

A child started with `start_child` runs ``python -m MODULE ...`` with this process's import path
(a test module's specs, for one): it pays its imports (numba, hypothesis, the env's modules:
about 1.3 s on a 2-core machine; the kit reads numpy outputs and never imports torch) and
compiles or loads what it runs. A child made with `fork_child`
is a copy of this process (``os.fork``): imports done, programs compiled, the env's spec in
memory whatever it holds; it starts in milliseconds. Forking is safe only where nothing in
this process runs beside the caller (`fork_refusal` says when it is not). Either writes its
stderr to ``FOLDER/stderr.txt``: a pipe nobody reads while the other checks run would stall
the child once full.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
import traceback
import warnings

__all__ = [
    "ForkedChild",
    "fork_child",
    "fork_refusal",
    "read_stderr",
    "start_child",
    "stop_child",
    "transportable_env",
    "write_json",
]


def start_child(module: str, arguments: list[str], folder: str, environment: dict) -> subprocess.Popen:
    """Start ``python -m module *arguments`` with ``environment`` and this process's import path."""
    environment = {**environment, "PYTHONPATH": os.pathsep.join(path for path in sys.path if path)}
    with open(os.path.join(folder, "stderr.txt"), "w") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", module, *arguments], env=environment, stdout=subprocess.DEVNULL, stderr=stderr
        )


def fork_refusal() -> str | None:
    """Why this process cannot fork a child that runs the kit's code safely, or None when it can.

    A forked child holds one thread, the caller's: a lock another thread held at the fork
    stays locked in it for good. So: Linux only (macOS's system libraries are not fork-safe),
    no other Python thread, and no CUDA context (neither numba's nor torch's). Native thread
    pools this process may have started (numba's thread team, torch's) are not the child's:
    the kit's checks bind the serial twin only (`kernelgym.envs.testing.harness.checking`),
    and `fork_child` gives torch one thread.
    """
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return f"os.fork is not safe on {sys.platform}"
    if threading.active_count() > 1:
        return f"{threading.active_count()} threads run in this process"
    driver = sys.modules.get("numba.cuda.cudadrv.driver")
    # numba-cuda notes the process id once cuInit succeeded (not where no driver was found)
    if driver is not None and getattr(getattr(driver, "driver", None), "pid", None) is not None:
        return "numba's CUDA driver is initialized"
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "torch's CUDA is initialized"
    return None


class ForkedChild:
    """A child made by `fork_child`: the parts of `subprocess.Popen` the kit's pending checks use."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The exit code (negative: the signal that ended it), or None while it runs."""
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the child's end (at most ``timeout`` seconds: `subprocess.TimeoutExpired` after)."""
        if timeout is None:
            while self.returncode is None:
                _, status = os.waitpid(self.pid, 0)
                self.returncode = os.waitstatus_to_exitcode(status)
            return self.returncode
        deadline = time.monotonic() + timeout
        while (code := self.poll()) is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"forked child {self.pid}", timeout)
            time.sleep(0.01)
        return code

    def kill(self) -> None:
        """SIGKILL the child if it still runs."""
        if self.poll() is None:
            os.kill(self.pid, signal.SIGKILL)


def fork_child(work, folder: str) -> ForkedChild:
    """Run ``work()`` in a forked copy of this process (check `fork_refusal` first).

    The child exits with 0 once ``work`` returns, with the code of a `SystemExit` it raises,
    and with 1 if it raises anything else (the traceback in ``FOLDER/stderr.txt``); it never
    returns into the caller's stack (a test runner's, the CLI's).
    """
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # not written twice: by this process and by its copy
    with warnings.catch_warnings():
        # Python 3.12+ warns when native threads run (numba's or torch's pools): the child never
        # uses them (`fork_refusal`), and no Python thread runs
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid:
        return ForkedChild(pid)
    code = 1
    try:
        # a test runner's captured streams are this process's: the child writes its own files
        output = os.open(os.devnull, os.O_WRONLY)
        errors = os.open(os.path.join(folder, "stderr.txt"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(output, 1)
        os.dup2(errors, 2)
        sys.stdout, sys.stderr = open(1, "w", closefd=False), open(2, "w", closefd=False)
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.set_num_threads(1)  # torch's OpenMP pool, if the parent started one, is not the child's
        work()
        code = 0
    except SystemExit as exit:
        code = exit.code if isinstance(exit.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stderr.flush()
        os._exit(code)


def write_json(path: str, data) -> None:
    """A child's result: ``data`` as JSON at ``path``, written whole, then renamed (the parent
    never reads half a result)."""
    with open(path + ".part", "w") as file:
        json.dump(data, file)
    os.replace(path + ".part", path)


def read_stderr(folder: str) -> str:
    """What the child started in ``folder`` wrote to stderr."""
    with open(os.path.join(folder, "stderr.txt")) as file:
        return file.read()


def stop_child(process: subprocess.Popen) -> None:
    """Kill the child if it still runs, and reap it."""
    if process.poll() is None:
        process.kill()
        process.wait()


def transportable_env(env):
    """``env`` (an id or an `EnvSpec`) as a child process can receive it: the id, a picklable spec,
    or ``"module:attr"`` of a module holding it; a TypeError naming the env otherwise."""
    if isinstance(env, str):
        return env
    try:
        pickle.dumps(env)
        return env
    except Exception as error:
        if getattr(env, "distribution", None):
            return env.id  # registered by an installed distribution: the child finds it by id
        name = _module_attribute(env)
        if name is not None:
            return name  # e.g. a spec with a lambda (num_agents=lambda params: ...): the child imports it
        raise TypeError(
            f"env: the EnvSpec {getattr(env, 'id', env)!r} cannot be pickled for the kit's child processes "
            f"({type(error).__name__}: {error}); register it through an entry point or pass 'module:attr'"
        ) from error


def _module_attribute(env) -> str | None:
    """``"module:attr"`` of an importable module holding ``env`` as a global, or None."""
    for module_name, module in list(sys.modules.items()):
        if module_name == "__main__" or module is None:
            continue
        for attr, value in list(vars(module).items()):
            if value is env:
                return f"{module_name}:{attr}"
    return None
