"""The parent's side of ``VectorSampledTasks``: its worker processes and their replies.

Each worker process hosts a contiguous block of samplers and runs
`worker_main`. The pool sends commands, and
waits for replies on each worker's pipe and process sentinel together (never a bare
``recv``), so that a worker that dies is reported at once (``WorkerCrashedError``) and
one that stays silent after ``read_timeout`` seconds as ``WorkerTimeoutError``. A lost
worker is restarted (``restart_on_failure``) or every worker is stopped.

Interruptions (Ctrl-C): replies already read are kept on their worker (``reply``) and
`WorkerPool.gather` resumes where it was interrupted (``VectorSampledTasks``
resumes an interrupted step this way); an interruption while a message was half sent or
half read leaves the pipes out of step, and the pool is then ``broken`` (every later
call must fail; only ``close`` remains).
"""

from __future__ import annotations

import pickle
import time
import traceback
import warnings
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from kernelgym.collectors.processes import crashed_error, reap, start_process, wait_readable, watch
from kernelgym.collectors.wire import FAILED, encode, rebuild_failures
from kernelgym.collectors.worker_errors import (
    WorkerError,
    WorkerRestartWarning,
    WorkerTimeoutError,
    error_from_failures,
)
from kernelgym.collectors.worker_loop import worker_main

#: seconds ``close`` waits for workers to close their samplers before stopping them
CLOSE_TIMEOUT = 5.0


class WorkerHandle:
    """One worker process, its end of the pipe and the samplers it hosts.

    ``unanswered`` counts the commands sent and not yet answered; ``reply`` holds a
    reply read by a ``gather`` that was interrupted before it returned.
    """

    __slots__ = ("index", "process", "connection", "first", "count", "selector", "unanswered", "reply")

    def __init__(self, index: int, process: Any, connection: Connection, first: int, count: int):
        self.index = index
        self.process = process
        self.connection = connection
        self.first = first
        self.count = count
        self.unanswered = 1  # the worker reports once its samplers are made
        self.reply: tuple | WorkerError | None = None
        self.selector = watch(connection, process)

    def stop(self) -> None:
        """Stop the process (terminate, then kill) and release the pipe."""
        reap(self.process)
        self.selector.close()
        self.connection.close()


class WorkerPool:
    """Worker processes hosting the samplers of one ``VectorSampledTasks``.

    Parameters
    ----------
    mp_ctx : multiprocessing context
    payloads : list of bytes
        Per worker, ``cloudpickle.dumps((make_sampler_fn, its sampler_fn_args))``.
    firsts : list of int
        Per worker, the index of its first sampler.
    num_samplers : int
    auto_resample_when_done : bool
    read_timeout : float or None
    restart_on_failure : bool
    active_of : callable
        ``active_of(worker)``: the local indices of the worker's unpaused samplers (a
        restarted worker keeps paused samplers paused).
    """

    def __init__(
        self,
        mp_ctx: Any,
        payloads: list[bytes],
        firsts: list[int],
        num_samplers: int,
        auto_resample_when_done: bool,
        read_timeout: float | None,
        restart_on_failure: bool,
        active_of: Callable[[WorkerHandle], list[int]],
    ):
        self.mp_ctx = mp_ctx
        self._payloads = payloads
        self._bounds = list(zip(firsts, firsts[1:] + [num_samplers]))
        self._auto_resample_when_done = auto_resample_when_done
        self.read_timeout = read_timeout
        self.restart_on_failure = restart_on_failure
        self._active_of = active_of
        self.workers: list[WorkerHandle] = []
        #: why the pipes are out of step (a half sent or half read message), or None
        self.broken: str | None = None
        #: a worker was lost and not replaced: the owner must ``close`` the pool
        self.failed = False

    # -- processes ---------------------------------------------------------------------------

    def start(self) -> None:
        """Start every worker and wait until each has made its samplers."""
        for index, (first, stop) in enumerate(self._bounds):
            self.workers.append(self._start_worker(index, list(range(stop - first))))
        self.gather(self.workers)

    def _start_worker(self, index: int, active: list[int]) -> WorkerHandle:
        first, stop = self._bounds[index]
        parent_end, worker_end = self.mp_ctx.Pipe(duplex=True)
        process = start_process(
            self.mp_ctx,
            worker_main,
            (worker_end, self._payloads[index], first, self._auto_resample_when_done, active),
            name=f"kernelgym-vector-tasks-{index}",
            workers=len(self._bounds),
        )
        worker_end.close()  # so that the parent sees EOF when the worker dies
        return WorkerHandle(index, process, parent_end, first, stop - first)

    def _lost(self, worker: WorkerHandle, timed_out: bool) -> WorkerError:
        samplers = tuple(range(worker.first, worker.first + worker.count))
        fields: dict[str, Any] = dict(
            sampler_index=samplers[0] if len(samplers) == 1 else None,
            sampler_indices=samplers,
            process_index=worker.index,
        )
        hosting = f"worker process {worker.index} (pid {worker.process.pid}, samplers {list(samplers)})"
        if timed_out:
            return WorkerTimeoutError(f"{hosting} did not answer within {self.read_timeout} s", **fields)
        worker.process.join(1.0)
        return crashed_error(worker.process, hosting, **fields)

    def _restart(self, index: int, error: WorkerError) -> None:
        old = self.workers[index]
        old.stop()
        new = self._start_worker(old.index, self._active_of(old))
        self.workers[old.index] = new
        reply = self._receive(new, self.deadline())
        if isinstance(reply, WorkerError) or reply[0] == FAILED:
            self.failed = True
            raise WorkerError(f"restarting worker process {old.index} failed", process_index=old.index) from (
                reply if isinstance(reply, WorkerError) else self.remote_error(old.index, reply[1])
            )
        error.restarted = True
        warnings.warn(WorkerRestartWarning(str(error)), stacklevel=7)  # the caller of step()

    # -- messages ----------------------------------------------------------------------------

    def deadline(self) -> float | None:
        return None if self.read_timeout is None else time.monotonic() + self.read_timeout

    def send(self, workers: list[WorkerHandle], messages: list[bytes]) -> None:
        """Send ``messages[k]`` to ``workers[k]``; a dead worker is not an error here (the
        wait for its reply reports it)."""
        try:
            for worker, message in zip(workers, messages):
                try:
                    worker.connection.send_bytes(message)
                except BrokenPipeError:
                    pass
                worker.unanswered += 1
        except BaseException:  # e.g. Ctrl-C between two workers or inside a send
            self.broken = "a command was interrupted while it was being sent to the workers"
            raise

    def command(self, workers: list[WorkerHandle], command: str, args: list[tuple]) -> None:
        """Encode one command per worker (all before sending any), then send them."""
        self.send(workers, [encode(command, worker_args) for worker_args in args])

    def _receive(self, worker: WorkerHandle, deadline: float | None) -> tuple | WorkerError:
        """The worker's next reply, or the error saying why none will come."""
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        state = wait_readable(worker.selector, worker.connection, timeout)
        if state != "ready":
            return self._lost(worker, timed_out=state == "timeout")
        try:
            data = worker.connection.recv_bytes()
        except (EOFError, OSError):  # the pipe closed: the process is gone
            return self._lost(worker, timed_out=False)
        except BaseException:  # interrupted inside a message: the pipe is out of step
            self.broken = "a reply was interrupted while it was being read from a worker"
            raise
        worker.unanswered -= 1
        try:
            return pickle.loads(data)
        except Exception:  # e.g. a class the parent cannot import: report it, keep the protocol in step
            return (FAILED, [(None, "the parent could not unpickle the reply:\n" + traceback.format_exc(), None)])

    def remote_error(self, process_index: int, failures: list) -> WorkerError:
        return error_from_failures(rebuild_failures(process_index, failures))

    def gather(
        self, workers: list[WorkerHandle], substitute_lost: bool = False, raise_failures: bool = True
    ) -> tuple[list[Any], dict[int, WorkerError]]:
        """Every worker's reply value, in order, after all have answered.

        A lost worker is restarted (``restart_on_failure``) or stopped, and the pool
        ``failed``; its error is raised unless ``substitute_lost``, which returns None
        for its value and the errors by process index. Failures in user code raise
        ``WorkerError``. Interrupted (Ctrl-C), it keeps the replies read so far: the next
        ``gather`` of the same workers resumes.
        """
        deadline = self.deadline()
        for worker in workers:
            if worker.reply is None:
                worker.reply = self._receive(worker, deadline)
                if isinstance(worker.reply, WorkerError):
                    worker.unanswered = 0
        replies = [worker.reply for worker in workers]
        for worker in workers:
            worker.reply = None
        lost = {worker.index: reply for worker, reply in zip(workers, replies) if isinstance(reply, WorkerError)}
        answered = {worker.index: reply for worker, reply in zip(workers, replies) if isinstance(reply, tuple)}
        if lost:
            if not self.restart_on_failure:
                for index in lost:
                    self.workers[index].stop()
                self.failed = True
                raise next(iter(lost.values()))
            for index, error in lost.items():
                self._restart(index, error)
            if not substitute_lost:
                raise next(iter(lost.values()))
        failures = [
            failure
            for index, reply in answered.items()
            if reply[0] == FAILED
            for failure in rebuild_failures(index, reply[1])
        ]
        if failures and raise_failures:
            raise error_from_failures(failures)
        return [None if worker.index in lost else answered[worker.index][1] for worker in workers], lost

    def close(self) -> list[WorkerError]:
        """Close the samplers and stop every worker; waits at most ``CLOSE_TIMEOUT`` s.

        Returns the errors of samplers whose ``close`` raised.
        """
        deadline = time.monotonic() + CLOSE_TIMEOUT
        failures = []
        closing = []
        if self.broken is None:
            for worker in self.workers:
                try:
                    worker.connection.send_bytes(encode("close", ()))
                    worker.unanswered += 1
                    closing.append(worker)
                except OSError:  # its pipe is closed: it was stopped already
                    pass
        for worker in closing:
            reply = None
            while worker.unanswered and not isinstance(reply, WorkerError):  # the close reply comes last
                reply = self._receive(worker, deadline)
            if isinstance(reply, tuple) and reply[0] == FAILED:
                failures.append(self.remote_error(worker.index, reply[1]))
        for worker in self.workers:
            worker.process.join(max(0.0, deadline - time.monotonic()))
            worker.stop()
        return failures
