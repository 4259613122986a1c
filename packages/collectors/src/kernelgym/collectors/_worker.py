"""The loop each ``VectorSampledTasks`` worker process runs, and its message format.

Parent and worker exchange pickled tuples over a duplex pipe with ``send_bytes`` /
``recv_bytes`` (plain pickle, no ``ForkingPickler`` reducers): the parent sends
``(method_name, args)`` for a ``SamplerGroup`` method, the worker answers ``(OK, value)``
or ``(FAILED, failures)`` where each failure is ``(sampler_index, traceback_text,
cloudpickled_exception_or_None)``. The worker answers ``(OK, None)`` once its samplers
are built, and ends after ``close`` or when the parent goes away.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import threading
from collections.abc import Sequence
from multiprocessing.connection import Connection

import cloudpickle
import numpy as np

from kernelgym.collectors._sampler_group import SamplerFailure, SamplerFailures, SamplerGroup
from kernelgym.collectors.tasks import RLStepResult

OK = "ok"
FAILED = "failed"

PortableFailure = tuple[int | None, str, bytes | None]


def pack_results(results: list[RLStepResult]) -> tuple:
    """Step results as columns; observations of one shape and dtype as one stacked array.

    Pickling six columns (and one array) costs a fraction of pickling each result and
    each observation on its own: this is the hot path of ``VectorSampledTasks.step``.
    """
    observations, rewards, dones, infos, terminated, truncated = zip(*results)
    first = observations[0]
    if isinstance(first, np.ndarray) and all(
        type(obs) is np.ndarray and obs.shape == first.shape and obs.dtype == first.dtype for obs in observations
    ):
        observations = np.stack(observations)
    return observations, rewards, dones, infos, terminated, truncated


def unpack_results(columns: tuple) -> list[RLStepResult]:
    """The results ``pack_results`` packed (they were validated when made)."""
    return list(map(RLStepResult._make, zip(*columns)))


def portable_failures(failures: list[SamplerFailure]) -> list[PortableFailure]:
    """Failures in a form that crosses processes (an unpicklable exception is left out)."""
    portable = []
    for failure in failures:
        try:
            exception_bytes = cloudpickle.dumps(failure.exception)
        except Exception:
            exception_bytes = None
        portable.append((failure.sampler_index, failure.traceback_text, exception_bytes))
    return portable


def _send(connection: Connection, reply: tuple) -> None:
    try:
        data = pickle.dumps(reply, pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        error = TypeError(f"the worker's reply could not be pickled: {exc!r}")
        error.__cause__ = exc
        data = pickle.dumps((FAILED, portable_failures([SamplerFailure(None, error)])), pickle.HIGHEST_PROTOCOL)
    connection.send_bytes(data)


def _exit_with_parent() -> None:
    """End this process when the parent dies, even while user code hangs."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        parent.join()
        os._exit(1)

    threading.Thread(target=watch, name="kernelgym-parent-watch", daemon=True).start()


def worker_main(
    connection: Connection, payload: bytes, first_index: int, auto_resample_when_done: bool, active: Sequence[int]
) -> None:
    """Build the samplers ``cloudpickle.loads(payload)`` describes, then serve commands."""
    # Ctrl-C reaches the whole process group; the parent decides when workers stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _exit_with_parent()
    try:
        make_sampler_fn, sampler_fn_args = cloudpickle.loads(payload)
        group = SamplerGroup(make_sampler_fn, sampler_fn_args, first_index, auto_resample_when_done, active)
    except SamplerFailures as exc:
        _send(connection, (FAILED, portable_failures(exc.failures)))
        return
    except Exception as exc:
        _send(connection, (FAILED, portable_failures([SamplerFailure(None, exc)])))
        return
    _send(connection, (OK, None))
    while True:
        try:
            command, args = pickle.loads(connection.recv_bytes())
        except (EOFError, OSError):  # the parent closed its end or died
            return
        try:
            if command not in SamplerGroup.COMMANDS:
                raise ValueError(f"command must be one of {sorted(SamplerGroup.COMMANDS)}, got {command!r}")
            value = getattr(group, command)(*args)
            reply = (OK, pack_results(value) if command == "step" and value else value)
        except SamplerFailures as exc:
            reply = (FAILED, portable_failures(exc.failures))
        except Exception as exc:
            reply = (FAILED, portable_failures([SamplerFailure(None, exc)]))
        try:
            _send(connection, reply)
        except (BrokenPipeError, OSError):
            return
        if command == "close":
            return
