"""Ray's failures as the package's ``WorkerError`` hierarchy, and waiting on actors with a deadline.

| Ray says                                                  | the caller gets        |
|-----------------------------------------------------------|------------------------|
| ``GetTimeoutError`` (no answer before the deadline)       | ``WorkerTimeoutError`` |
| ``RayTaskError`` (the actor's code raised)                | ``WorkerError`` with the remote traceback |
| ``RayActorError`` / ``ActorDiedError`` (process killed, node lost), ``WorkerCrashedError``, ``NodeDiedError``, ``ObjectLostError`` | ``WorkerCrashedError`` with Ray's account of the death |

Ray's error is kept as ``__cause__``. Ray does not tell a process's exit code to the
driver, so ``WorkerCrashedError.exitcode`` is None here; Ray's message says how it died.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import ray
import ray.exceptions as rex

from kernelgym.collectors.worker_errors import WorkerCrashedError, WorkerError, WorkerTimeoutError

#: Ray errors that mean the actor (its process or its node) is gone
LOST = (rex.RayActorError, rex.WorkerCrashedError, rex.NodeDiedError, rex.ObjectLostError)


class Host:
    """One Ray actor of a kernelgym collector: its handle, name, process id and samplers."""

    __slots__ = ("index", "actor", "name", "pid", "samplers")

    def __init__(self, index: int, actor: Any, name: str, samplers: tuple[int, ...] = ()):
        self.index, self.actor, self.name, self.samplers = index, actor, name, samplers
        self.pid: int | None = None  # reported by the actor once it runs

    def describe(self) -> str:
        where = f"Ray actor {self.index} ({self.name}, pid {self.pid}"
        return where + (f", samplers {list(self.samplers)})" if self.samplers else ")")

    def fields(self) -> dict[str, Any]:
        """``WorkerError`` keyword fields naming this actor and its samplers."""
        return dict(
            sampler_index=self.samplers[0] if len(self.samplers) == 1 else None,
            sampler_indices=self.samplers,
            process_index=self.index,
            worker=self.name,
        )


class ActorHosts:
    """What a class hosting its work in Ray actors (``self._hosts``, a list of `Host`) tells about them."""

    _hosts: Sequence[Host]  # read only here: a subclass keeps a list of its own Host subclass

    @property
    def worker_pids(self) -> list[int | None]:
        """Process ids of the actors (new ones after a restart), as Ray runs them on their nodes."""
        return [host.pid for host in self._hosts]

    @property
    def actor_names(self) -> list[str]:
        """The actors' Ray names (``ray list actors`` shows them)."""
        return [host.name for host in self._hosts]


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def worker_error(exc: BaseException, host: Host, timeout: float | None = None) -> WorkerError:
    """The ``WorkerError`` that tells the caller what Ray's ``exc`` says about ``host``."""
    fields = host.fields()
    if isinstance(exc, rex.GetTimeoutError):
        error: WorkerError = WorkerTimeoutError(f"{host.describe()} did not answer within {timeout} s", **fields)
    elif isinstance(exc, rex.RayTaskError):
        cause = exc.cause if isinstance(exc.cause, BaseException) else exc
        error = WorkerError(
            f"{host.describe()} raised {type(cause).__name__}: {cause}",
            remote_traceback=getattr(exc, "traceback_str", None) or str(exc),
            **fields,
        )
        exc = cause
    elif isinstance(exc, LOST):
        error = WorkerCrashedError(f"{host.describe()} died: {ray_account(exc)}", exitcode=None, **fields)
        error.remote_traceback = str(exc)
    else:
        error = WorkerError(f"{host.describe()} failed: {type(exc).__name__}: {exc}", **fields)
    error.__cause__ = exc
    return error


def ray_account(exc: BaseException) -> str:
    """Ray's one-line reason for a lost actor (its message is long and fixed-form)."""
    text = " ".join(str(exc).split())
    for marker in ("The actor is dead because", "The actor died because", "Worker exit detail:"):
        if marker in text:
            return text[text.index(marker) :][:240]
    return text[:240]


#: seconds an actor may take to start (placement, process start, imports, the env's make); at
#: least the timeout. A cold make compiles the env's kernels in each actor: tens of seconds
#: alone, minutes for a big env or on a busy machine, which is no hang.
START_TIMEOUT = 300.0


def start_timeout(timeout: float | None) -> float | None:
    """The allowance for an actor's start-up under a call ``timeout``: a healthy actor that
    is still being placed and importing must not be reported hung."""
    return None if timeout is None else max(timeout, START_TIMEOUT)


def session() -> tuple[str, str]:
    """This driver's Ray session: its node and job ids. After ``ray.shutdown()`` and
    ``ray.init()`` one of them changes (a job id alone repeats on a new local cluster)."""
    context = ray.get_runtime_context()
    return context.get_node_id(), context.get_job_id()


def in_session(started: tuple[str, str] | None) -> bool:
    """Whether this driver is still in the Ray session ``started`` (None: never connected)."""
    return started is not None and ray.is_initialized() and session() == started


def check_session(owner: Any, started: tuple[str, str]) -> None:
    """Raise a RuntimeError saying so if Ray was shut down since ``owner`` started its actors
    in session ``started`` (their handles then fail with Ray's own errors, or start a new cluster)."""
    if not in_session(started):
        name = type(owner).__name__
        raise RuntimeError(
            f"this {name} lost its actors: Ray was shut down (ray.shutdown()) after it started them, "
            f"and they ended with that Ray session; make a new {name}"
        )


def deadline_after(timeout: float | None) -> float | None:
    return None if timeout is None else time.monotonic() + timeout


def remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def get(ref: Any, host: Host, deadline: float | None, timeout: float | None) -> Any:
    """``ray.get(ref)`` before ``deadline``, a failure raised as the ``WorkerError`` for ``host``."""
    try:
        return ray.get(ref, timeout=remaining(deadline))
    except (rex.RayError, rex.GetTimeoutError) as exc:
        error = worker_error(exc, host, timeout)
    raise error from error.__cause__


def call_once_up(method: Any, host: Host, deadline: float | None, timeout: float | None) -> Any:
    """``method.remote()``'s value once the actor answers: while Ray restarts it, a call
    fails with ``ActorUnavailableError`` (not lost: asked again until ``deadline``)."""
    while True:
        try:
            return ray.get(method.remote(), timeout=remaining(deadline))
        except rex.ActorUnavailableError as exc:
            if deadline is not None and time.monotonic() >= deadline:
                error = worker_error(rex.GetTimeoutError(str(exc)), host, timeout)
                raise error from exc
            time.sleep(0.05)
        except (rex.RayError, rex.GetTimeoutError) as exc:
            error = worker_error(exc, host, timeout)
            raise error from error.__cause__


def kill(host: Host, restart: bool = False) -> None:
    """Stop the actor's process; with ``restart`` Ray makes it again (its ``max_restarts``)."""
    try:
        ray.kill(host.actor, no_restart=not restart)
    except ValueError:  # not an actor handle any more (Ray shut down)
        pass


def wait_dead(hosts: Sequence[Host], timeout: float) -> None:
    """Return once Ray reports every killed actor dead, or after ``timeout`` s.

    ``ray.kill`` is asynchronous: until the kill reaches the actor's process a call can
    still be answered (seen on a loaded machine), so each actor is asked until a call
    fails with ``ActorDiedError``.
    """
    deadline = deadline_after(timeout)
    for host in hosts:
        while deadline is None or time.monotonic() < deadline:
            try:
                ray.get(host.actor.__ray_ready__.remote(), timeout=remaining(deadline))
            except rex.ActorDiedError:
                break
            except rex.ActorUnavailableError:
                pass  # on its way down or restarting: ask again
            except (rex.RayError, rex.GetTimeoutError):
                break  # Ray shut down, or the deadline passed
            time.sleep(0.05)
