"""Errors raised in the parent when a task sampler or a worker process fails."""

from __future__ import annotations

import signal as _signal


class WorkerError(RuntimeError):
    """A task or task sampler raised, or a worker process was lost.

    Attributes
    ----------
    sampler_index : int or None
        The sampler whose code raised; for a lost process hosting one sampler, that one.
    sampler_indices : tuple of int
        Every sampler affected (all samplers of a lost process).
    process_index : int or None
        The worker process, None in ``SingleProcessVectorSampledTasks``.
    worker : str or None
        The worker process's name (the rollout engines name their workers).
    remote_traceback : str or None
        The traceback formatted where the exception happened.
    restarted : bool
        Whether the failed worker was replaced (``restart_on_failure=True``).
    """

    def __init__(
        self,
        message: str,
        *,
        sampler_index: int | None = None,
        sampler_indices: tuple[int, ...] = (),
        process_index: int | None = None,
        remote_traceback: str | None = None,
        worker: str | None = None,
    ):
        self.message = message
        self.sampler_index = sampler_index
        self.sampler_indices = tuple(sampler_indices) or ((sampler_index,) if sampler_index is not None else ())
        self.process_index = process_index
        self.remote_traceback = remote_traceback
        self.worker = worker
        self.restarted = False
        super().__init__(message)

    def __str__(self) -> str:
        text = self.message
        if self.restarted:
            text += " (the worker was restarted)"
        if self.remote_traceback:
            text += f"\n\nRemote traceback:\n{self.remote_traceback.rstrip()}"
        return text

    def __reduce__(self):
        # keyword-only fields do not survive the default exception pickling
        return (_rebuild, (type(self), self.__dict__))


def _rebuild(cls: type[WorkerError], state: dict) -> WorkerError:
    error = cls.__new__(cls)
    error.__dict__.update(state)
    error.args = (state["message"],)
    return error


class WorkerCrashedError(WorkerError):
    """A worker process died (killed by a signal, segfault, ``os._exit``).

    Attributes
    ----------
    exitcode : int or None
        ``Process.exitcode``: negative for death by a signal.
    signal : signal.Signals or None
        The signal that killed the process.
    """

    def __init__(self, message: str, *, exitcode: int | None, **fields):
        self.exitcode = exitcode
        self.signal = _signal.Signals(-exitcode) if exitcode is not None and exitcode < 0 else None
        super().__init__(message, **fields)


class WorkerTimeoutError(WorkerError, TimeoutError):
    """A worker process did not answer within its deadline (``read_timeout`` seconds, or a
    rollout's ``timeout``); it was stopped."""


class WorkerRestartWarning(RuntimeWarning):
    """A failed worker was replaced; the results of its samplers start new tasks."""


def error_from_failures(failures: list[tuple[int | None, int | None, str, BaseException | None]]) -> WorkerError:
    """One ``WorkerError`` from ``(process_index, sampler_index, traceback, exception)``
    tuples: it names the first failure and counts the others; the first exception (when
    known) is its ``__cause__``."""
    process_index, sampler_index, traceback_text, exception = failures[0]
    what = f"sampler {sampler_index}" if sampler_index is not None else f"worker process {process_index}"
    lines = traceback_text.strip().splitlines()
    message = f"{what} raised {lines[-1] if lines else 'an exception'}"
    if len(failures) > 1:
        message += f" (and {len(failures) - 1} more failures, samplers {[f[1] for f in failures[1:]]})"
    error = WorkerError(
        message,
        sampler_index=sampler_index,
        sampler_indices=tuple(f[1] for f in failures if f[1] is not None),
        process_index=process_index,
        remote_traceback=traceback_text,
    )
    error.__cause__ = exception
    return error
