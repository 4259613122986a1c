"""Worker processes the learner can always get out of (built on `kernelgym.collectors.processes`).

rlplay's learner waited on a barrier without a timeout, so a killed worker hung it.
Here every wait, on either side, polls in short slices: the learner checks that its
workers are alive between slices and gives up after ``timeout`` seconds; a worker
checks that the learner still wants it (``stop``) and is alive. A worker that dies
surfaces as `WorkerError` (it raised: its traceback) or
`WorkerCrashedError` (killed or exited: its signal or exit
code), one that stays silent as `WorkerTimeoutError`, and
`Workers.shutdown` leaves no child process behind.
"""

from __future__ import annotations

import multiprocessing
import queue
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import cloudpickle
import torch.multiprocessing  # noqa: F401 - registers the reducers that share tensors by handle

from kernelgym.collectors import processes
from kernelgym.collectors.worker_errors import WorkerError, WorkerTimeoutError

__all__ = ["Workers", "CloudpickleSpawner", "get_context", "locked", "poll_until", "POLL_S"]

# how long one slice of a wait lasts: the latency of noticing a dead peer or a stop
POLL_S = 0.05


class CloudpickleSpawner:
    """Carry a callable (a lambda, a closure) to a spawned process via cloudpickle."""

    def __init__(self, fn: Callable):
        self.fn = fn

    def __getstate__(self) -> bytes:
        return cloudpickle.dumps(self.fn)

    def __setstate__(self, data: bytes) -> None:
        self.fn = cloudpickle.loads(data)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


def get_context(start_method: str | None = None):
    """The multiprocessing context of ``start_method``; a fork server imports torch and
    the rollout engines once, and each worker forks from it ready to go."""
    return processes.get_context(start_method, preload=["torch", "kernelgym.collectors.rollout"])


def poll_until(receive: Callable[[float], Any], *, timeout: float, check: Callable[[], None], what: str) -> Any:
    """Call ``receive(slice_s)`` until it returns, calling ``check()`` between slices.

    ``receive`` raises `queue.Empty` when a slice passes without a result.
    Raises `TimeoutError` naming ``what`` after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            return receive(min(POLL_S, max(deadline - time.monotonic(), 0.0)))
        except queue.Empty:
            pass
        check()
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what}: nothing within {timeout} s")


def acquirer(lock_or_semaphore: Any) -> Callable[[float], bool]:
    """A ``receive`` for `poll_until` that acquires a lock or semaphore."""

    def receive(slice_s: float) -> bool:
        if not lock_or_semaphore.acquire(timeout=slice_s):
            raise queue.Empty
        return True

    return receive


def connection_receiver(conn: Any) -> Callable[[float], Any]:
    """A ``receive`` for `poll_until` reading one object from a pipe end."""

    def receive(slice_s: float) -> Any:
        if not conn.poll(slice_s):
            raise queue.Empty
        try:
            return conn.recv()
        except (EOFError, ConnectionError):
            # the other end is gone: let `check` find out why, without spinning
            time.sleep(slice_s)
            raise queue.Empty from None

    return receive


@contextmanager
def locked(lock: Any, *, wait: Callable[..., Any] = poll_until, **wait_args: Any) -> Iterator[None]:
    """Hold ``lock``, acquired through ``wait(receive, **wait_args)``.

    ``wait`` is `poll_until` (``timeout``, ``check``, ``what``; in a worker) or the
    learner's `Workers.wait` (``timeout``, ``what``), so that waiting on a lock
    keeps the same deadline and watch as any other wait.
    """
    wait(acquirer(lock), **wait_args)
    try:
        yield
    finally:
        lock.release()


class StopRequested(Exception):
    """Raised inside a worker when the learner asked it to stop, or is gone."""


def worker_check(stop: Any) -> Callable[[], None]:
    """The ``check`` a worker passes to `poll_until`: stop when asked to or
    when the learner process is gone."""
    parent = multiprocessing.parent_process()

    def check() -> None:
        if stop.is_set() or (parent is not None and not parent.is_alive()):
            raise StopRequested

    return check


def worker_wait(receive: Callable[[float], Any], stop: Any) -> Any:
    """Wait in a worker until ``receive`` succeeds; `StopRequested` when the
    learner stops or dies first (there is no other deadline: the learner may train
    for as long as it likes)."""
    check = worker_check(stop)
    while True:
        try:
            return receive(POLL_S)
        except queue.Empty:
            check()


def _worker_main(target: Callable, errors: Any, stop: Any, name: str, *args: Any) -> None:
    """Run ``target(stop, *args)``; report any exception's traceback, exit 1."""
    try:
        target(stop, *args)
    except StopRequested:
        return
    except BaseException:
        errors.put((name, traceback.format_exc()))
        errors.close()
        errors.join_thread()  # flush before exiting, so the learner reads it
        sys.exit(1)


class Workers:
    """Start ``target(stop, *args)`` in one process per entry of ``args_list``.

    Parameters
    ----------
    mp : multiprocessing context (see `get_context`).
    target : picklable callable (module level) running the worker loop.
    args_list : one argument tuple per worker.
    name : prefix of the process names.
    """

    def __init__(self, mp: Any, target: Callable, args_list: Sequence[tuple], *, name: str):
        self.errors = mp.Queue()
        self.stop = mp.Event()
        self._mp, self._target, self._args_list, self._name = mp, target, list(args_list), name
        self.processes: list[Any] = []
        self._tracebacks: dict[str, str] = {}

    def start(self) -> Workers:
        """Start the workers (daemonic, ignoring SIGINT, dying with the learner: see
        `kernelgym.collectors.processes.start_process`)."""
        for i, args in enumerate(self._args_list):
            name = f"{self._name}-{i}"
            self.processes.append(
                processes.start_process(
                    self._mp,
                    _worker_main,
                    (self._target, self.errors, self.stop, name, *args),
                    name=name,
                    workers=len(self._args_list),
                )
            )
        return self

    def _traceback_of(self, name: str, exitcode: int) -> str | None:
        if exitcode < 0:
            return None  # killed by a signal: it had no chance to report
        deadline = time.monotonic() + 1.0
        while name not in self._tracebacks and time.monotonic() < deadline:
            try:
                worker, text = self.errors.get(timeout=0.1)
            except queue.Empty:
                continue
            self._tracebacks[worker] = text
        return self._tracebacks.get(name)

    def check(self) -> None:
        """Raise if any worker has exited (workers only exit when stopped):
        `WorkerError` with the traceback of a worker that
        raised, `WorkerCrashedError` for one that was killed
        or exited without one (see `kernelgym.collectors.processes.crashed_error`)."""
        for index, process in enumerate(self.processes):
            exitcode = process.exitcode
            if exitcode is None:
                continue
            fields = dict(worker=process.name, process_index=index)
            traceback_text = self._traceback_of(process.name, exitcode)
            if traceback_text:
                raise WorkerError(
                    f"rollout worker {process.name} raised an exception (exit code {exitcode})",
                    remote_traceback=traceback_text,
                    **fields,
                )
            error = processes.crashed_error(process, f"rollout worker {process.name}", **fields)
            raise error

    def wait(self, receive: Callable[[float], Any], *, timeout: float, what: str) -> Any:
        """Wait for ``receive`` (see `poll_until`) while watching the workers;
        `WorkerTimeoutError` after ``timeout`` seconds."""
        try:
            return poll_until(receive, timeout=timeout, check=self.check, what=what)
        except TimeoutError as error:
            alive = [p.name for p in self.processes if p.is_alive()]
            raise WorkerTimeoutError(f"{error}; workers still alive (hung?): {alive}") from None

    def shutdown(self, timeout: float = 1.0) -> None:
        """Ask the workers to stop, then terminate and finally kill the stragglers."""
        self.stop.set()
        deadline = time.monotonic() + timeout
        for process in self.processes:
            process.join(max(deadline - time.monotonic(), 0.0))
        for process in self.processes:
            processes.reap(process, timeout)
        self.errors.close()
        self.errors.cancel_join_thread()
