"""The one process layer of kernelgym.collectors: start, death detection, shutdown.

``VectorSampledTasks`` (its worker pool) and the rollout engines (``rollout.workers``)
start, watch and stop their worker processes with these functions only:

- `get_context` picks the start method; `start_process` starts a daemonic
  child that runs `child_main`: it ignores SIGINT (the parent decides when its
  workers stop), dies with its parent (`die_with_parent`) and takes its share of
  the cores for numba's threads (`share_cores`);
- `crashed_error` says how a dead child died (signal or exit code);
  `wait_readable` waits on a pipe and the child's sentinel together, so a death is
  seen at once, never as a hang;
- `reap` stops a child for good (terminate, then kill, then join: no zombie).

Process groups: each child leads its own process group (`child_main` calls
``os.setsid``), so that what it starts (an env's simulator subprocess) is in that group,
and `reap` signals the whole group: nothing a hung worker started outlives it. On
Linux a reaper in the group (`start_group_reaper`) kills the group once the child
ends in any way, its parent's death included.

Dying with the parent: on Linux the child asks the kernel for SIGKILL when its parent
thread ends (``prctl(PR_SET_PDEATHSIG)``), which works even while the child runs code
that holds the GIL (a numba loop); everywhere a watcher thread also ends the child once
its parent is gone, when the child's code lets it run. With ``forkserver`` the child's
parent is Python's fork server, which exits when the parent process does (once the
child has closed its copy of the server's lifeline, see `die_with_parent`).
"""

from __future__ import annotations

import ctypes
import multiprocessing
import numbers
import os
import re
import selectors
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any, cast

from kernelgym.collectors.worker_errors import WorkerCrashedError

__all__ = [
    "child_main",
    "crashed_error",
    "die_with_parent",
    "get_context",
    "is_seconds",
    "reap",
    "share_cores",
    "start_process",
    "wait_readable",
    "watch",
]

#: ``prctl`` option of Linux: the signal this process receives when its parent thread ends
PR_SET_PDEATHSIG = 1


def get_context(start_method: str | None, *, argument: str = "start_method", preload: Sequence[str] = ()) -> Any:
    """The multiprocessing context of ``start_method`` (None: the platform's default).

    Parameters
    ----------
    start_method : str or None
        ``"fork"``, ``"forkserver"`` or ``"spawn"`` (where the platform has them).
    argument : str
        The caller's name for ``start_method``, used in the error message.
    preload : sequence of str
        Modules the fork server imports once, so that each worker forked from it starts
        with them loaded (ignored by the other start methods).

    Raises
    ------
    ValueError
        ``start_method`` is not a start method of this platform.
    """
    methods = multiprocessing.get_all_start_methods()
    if start_method is not None and start_method not in methods:
        raise ValueError(f"{argument} must be one of {methods}, got {start_method!r}")
    mp = multiprocessing.get_context(start_method)
    if preload and mp.get_start_method() == "forkserver":
        mp.set_forkserver_preload(list(preload))
    return mp


def die_with_parent(kernel_signal: bool, forked_by_server: bool = False) -> None:
    """End this process when its parent dies, even while user code hangs.

    Parameters
    ----------
    kernel_signal : bool
        Also ask Linux for SIGKILL when the parent thread ends (``PR_SET_PDEATHSIG``).
        Only right when the thread that started this process lives as long as its
        process: the main thread of the parent, or the fork server's.
    forked_by_server : bool
        This process was forked by Python's fork server. The fork server exits when the
        pipe from the parent process reaches EOF, but hands every child a copy of that
        pipe's write end: while a child lives the server never sees EOF, and the child
        (whose kernel parent is the server) never gets its death signal. The copy is
        closed here; a fork server this process may start later gets its own pipe.
    """
    if forked_by_server:
        from multiprocessing import forkserver

        # the module's one ForkServer (private, stable since 3.4; its fields are not in the stubs)
        server: Any = forkserver._forkserver
        if getattr(server, "_forkserver_alive_fd", None) is not None and server._forkserver_pid is None:
            os.close(server._forkserver_alive_fd)
            server._forkserver_alive_fd = None
    if kernel_signal and sys.platform.startswith("linux"):
        parent_pid = os.getppid()
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        if os.getppid() != parent_pid:  # the parent died before the request was made
            os._exit(1)
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        parent.join()
        os._exit(1)

    threading.Thread(target=watch, name="kernelgym-parent-watch", daemon=True).start()


def share_cores(workers: int) -> int:
    """Limit this process's numba threads to its share of the usable cores, as one of
    ``workers`` processes that run at once (at least one; less when ``NUMBA_NUM_THREADS``
    already asks for less).

    Workers that each took every core would spin against each other: numba's thread
    team falls far below one thread when the cores are oversubscribed (see
    `kernelgym.core.cpu_threads`). Before numba is imported this sets ``NUMBA_NUM_THREADS``;
    after, ``numba.set_num_threads`` for the calling thread (numba stays optional here).

    Returns
    -------
    int
        The thread count set.
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers: expected an int >= 1, got {workers!r}")
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    threads = max(1, cpus // workers)
    numba = sys.modules.get("numba")
    if numba is not None:
        threads = min(threads, numba.config.NUMBA_NUM_THREADS)
        numba.set_num_threads(threads)
    else:
        asked = os.environ.get("NUMBA_NUM_THREADS", "")
        if asked.isdigit() and 0 < int(asked) < threads:
            threads = int(asked)
        os.environ["NUMBA_NUM_THREADS"] = str(threads)
    return threads


def child_main(target: Callable[..., Any], start: tuple[bool, bool], workers: int, *args: Any) -> Any:
    """What a child started by `start_process` runs: ``target(*args)`` after
    ignoring SIGINT, arranging to die with its parent (``start``: the arguments of
    `die_with_parent`) and taking its share of the cores as one of ``workers``."""
    share_cores(workers)
    # Ctrl-C reaches the whole process group; the parent decides when workers stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A group (and session) of its own: reap() then stops whatever the worker's code started.
    # A new session rather than os.setpgrp: a background group that reads or writes the
    # terminal would be stopped by job control (SIGTTIN/SIGTTOU), i.e. hang.
    if hasattr(os, "setsid"):
        os.setsid()
    die_with_parent(*start)
    if sys.platform.startswith("linux"):
        start_group_reaper()
    return target(*args)


def start_group_reaper() -> None:
    """Fork a small process that kills this process's group once this process ends.

    A worker killed by its death signal (``PR_SET_PDEATHSIG``: SIGKILL, no code runs) would
    leave what its code started (a sampler's simulator subprocess) running in its group. The
    reaper, a child in that group, asks Linux for SIGTERM when the worker ends, however it
    ends, and then SIGKILLs the group: itself and whatever is left. It holds no file of the
    worker's (closed at once): the parent still sees the worker's pipes and sentinel close.
    What leaves the group (its own ``setsid``) is out of reach.
    """
    worker = os.getpid()
    if os.fork() != 0:
        return
    try:
        os.closerange(3, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 1024)
        # blocked before the request: a SIGTERM that comes before sigwait is kept pending, not lost
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() == worker:  # else the worker ended before the request was made
            signal.sigwait({signal.SIGTERM})
        os.killpg(0, signal.SIGKILL)
    finally:
        os._exit(0)


def start_process(mp: Any, target: Callable[..., Any], args: tuple, *, name: str, workers: int = 1) -> Any:
    """Start a daemonic child process running ``target(*args)`` through `child_main`.

    Parameters
    ----------
    mp : multiprocessing context (see `get_context`).
    target : picklable callable (module level).
    args : its arguments.
    name : the process name.
    workers : how many worker processes run at once, this one included: its numba
        threads are the usable cores divided by it (`share_cores`).
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers: expected an int >= 1, got {workers!r}")
    # PR_SET_PDEATHSIG fires when the *thread* that forked the child ends: safe for the
    # fork server's main thread and ours, not for a short-lived thread of the caller
    forked_by_server = mp.get_start_method() == "forkserver"
    kernel_signal = forked_by_server or threading.current_thread() is threading.main_thread()
    process = mp.Process(
        target=child_main, args=(target, (kernel_signal, forked_by_server), workers, *args), name=name, daemon=True
    )
    process.start()
    return process


def is_seconds(value: Any) -> bool:
    """Whether ``value`` is a usable wait: a real number of seconds in (0, ``threading.TIMEOUT_MAX``]
    (not a bool; a larger one, ``inf`` included, overflows the waits, and ``nan`` compares false)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    seconds = cast(float, value)  # typeshed's numbers.Real lacks the reflected comparisons a Real has
    return 0 < seconds <= threading.TIMEOUT_MAX


def crashed_error(process: Any, what: str, **fields: Any) -> WorkerCrashedError:
    """The error saying how the exited ``process`` (``what``, e.g. "worker process 1")
    died: "died of SIGKILL" or "died with exit code 3", naming the missing main guard of a
    script whose "spawn"/"forkserver" child died re-running it; ``fields`` go to the error."""
    exitcode = process.exitcode
    error = WorkerCrashedError(f"{what} died", exitcode=exitcode, **fields)
    if error.signal is not None:
        error.message += f" of {error.signal.name}"
    elif exitcode is not None:
        error.message += f" with exit code {exitcode}"
        if exitcode == 1 and _unguarded_main_script(process):
            error.message += (
                f": a {process._start_method!r} child first imports the main script "
                f"{sys.modules['__main__'].__file__}, which starts workers at its top level, so the child "
                'died starting them again while bootstrapping; start them under `if __name__ == "__main__":` '
                "(the child's traceback is on stderr)"
            )
    error.args = (error.message,)
    return error


#: the guard that keeps a script's top level from running again in a spawned child
_MAIN_GUARD = re.compile(r"""if\s+__name__\s*==\s*["']__main__["']|if\s+["']__main__["']\s*==\s*__name__""")


def _unguarded_main_script(process: Any) -> bool:
    """Whether ``process`` re-imported a main script that has no main guard: a
    "spawn"/"forkserver" child runs the parent's ``__main__`` file first, and one without
    ``if __name__ == "__main__":`` starts its workers again there and exits with code 1."""
    if getattr(process, "_start_method", None) not in ("spawn", "forkserver"):
        return False
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    if not path or not path.endswith(".py"):
        return False  # python -c, the REPL, a notebook: nothing is re-imported
    try:
        with open(path, encoding="utf-8") as file:
            return _MAIN_GUARD.search(file.read()) is None
    except (OSError, UnicodeDecodeError):
        return False


def wait_readable(selector: selectors.BaseSelector, connection: Any, timeout: float | None) -> str:
    """Wait until ``connection`` has data or its process has exited.

    ``selector`` watches ``connection`` and the process's ``sentinel`` (see
    `watch`). Returns ``"ready"`` (data to read), ``"exited"`` (the process is
    gone and left nothing to read) or ``"timeout"``.
    """
    ready = [key.fileobj for key, _ in selector.select(timeout)]
    if not ready:
        return "timeout"
    if connection in ready or connection.poll():
        return "ready"
    return "exited"


def watch(connection: Any, process: Any) -> selectors.BaseSelector:
    """A selector on ``connection`` and ``process.sentinel`` for `wait_readable`;
    made once per process because building one per wait costs more than a step's
    bookkeeping."""
    selector = selectors.DefaultSelector()
    selector.register(connection, selectors.EVENT_READ)
    selector.register(process.sentinel, selectors.EVENT_READ)
    return selector


def _signal_group(process: Any, sig: int) -> bool:
    """Send ``sig`` to the process group that ``process`` leads; False if there is none
    (no group support, or a child that has not made its group yet, or an empty group)."""
    pid = getattr(process, "pid", None)  # None: never started (or a stand-in without one)
    if not hasattr(os, "killpg") or pid is None:
        return False
    try:
        os.killpg(pid, sig)  # child_main made the child leader of group ``pid``
    except (ProcessLookupError, PermissionError):
        return False
    return True


def reap(process: Any, timeout: float = 1.0) -> None:
    """Stop ``process`` and its process group for good: terminate them, wait ``timeout``
    seconds, then kill them; returns once ``process`` has been joined (no zombie is left).

    The group holds what the child started (see `child_main`): those processes are
    killed too, even when the child itself already exited.
    """
    if process.is_alive():
        if not _signal_group(process, signal.SIGTERM):
            process.terminate()
        process.join(timeout)
    if process.is_alive() and not _signal_group(process, signal.SIGKILL):
        process.kill()
    # what the child started and left behind (or that ignored SIGTERM): Linux does not reuse
    # a pid while it names a group with members, so this reaches only the child's group
    _signal_group(process, signal.SIGKILL)
    process.join()
