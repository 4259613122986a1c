"""``RayVectorSampledTasks``: ``VectorSampledTasks`` with its samplers hosted in Ray actors.

The driver keeps the public API and its bookkeeping (``VectorSampledTasks``'s base
class: unpaused-task indices, routes, the all-finished resampling); each actor hosts one
``SamplerGroup``, the very class each worker process of ``VectorSampledTasks`` runs, and
speaks the same wire format (pickled commands, packed step results, portable failures).
So both classes give identical results on the same seeds.
"""

from __future__ import annotations

import os
import pickle
import traceback
import warnings
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import cloudpickle
import ray

from kernelgym.collectors.processes import is_seconds
from kernelgym.collectors.ray import faults
from kernelgym.collectors.ray._internals import (
    CLOSE_TIMEOUT,
    FAILED,
    OK,
    PackedArray,
    VectorTasksBase,
    encode,
    encode_reply,
    packable,
    rebuild_failures,
    serve,
    start_group,
)
from kernelgym.collectors.ray.cluster import actor_names, check_fits, check_max_restarts, check_resources, connect
from kernelgym.collectors.tasks import RLStepResult
from kernelgym.collectors.worker_errors import WorkerError, WorkerRestartWarning, error_from_failures

START_TIMEOUT = faults.START_TIMEOUT  # kept importable from here


class SamplerGroupActor:
    """The body of one Ray actor: a ``SamplerGroup`` serving pickled commands.

    Replies are pickled here, as a worker process pickles them, so that a value that does
    not cross processes comes back as a failure naming it, never as a broken actor.
    """

    def __init__(self, payload: bytes, first_index: int, auto_resample_when_done: bool, active: Sequence[int]):
        # the very code a worker process runs (worker_loop), so both behave alike
        self.group, self.startup = start_group(payload, first_index, auto_resample_when_done, active)

    def ready(self) -> tuple[bytes, int]:
        """How the samplers were made, and this actor's process id."""
        return encode_reply(self.startup), os.getpid()

    def run(self, message: bytes) -> bytes:
        """Run one encoded ``SamplerGroup`` command; the reply, pickled."""
        return encode_reply(serve(self.group, message)[1])


class _GroupHost(faults.Host):
    """A sampler-group actor and the replies it owes (oldest first)."""

    __slots__ = ("first", "count", "pending", "serving")

    def __init__(self, index: int, actor: Any, name: str, first: int, count: int):
        super().__init__(index, actor, name, tuple(range(first, first + count)))
        self.first, self.count = first, count
        self.pending: deque = deque()
        self.serving = False  # its samplers were made

    def send(self, message: bytes) -> None:
        self.pending.append(self.actor.run.remote(message))


class RayVectorSampledTasks(VectorTasksBase, faults.ActorHosts):
    """Many task samplers stepped in lockstep in Ray actors, on one machine or a cluster.

    Every name and semantic of ``VectorSampledTasks`` (``step``, ``async_step`` /
    ``wait_step``, ``pause_at`` / ``resume_all``, ``call`` / ``attr`` / ``command_at``,
    ``render``, ``auto_resample_when_done``, failures as ``WorkerError``); swap the class
    name to move samplers onto Ray.

    Parameters
    ----------
    make_sampler_fn, sampler_fn_args, auto_resample_when_done
        As in ``VectorSampledTasks`` (cloudpickled to the actors: lambdas work).
    multiprocessing_start_method, mp_ctx
        Accepted for a drop-in swap; Ray starts the actors' processes, so any value other
        than None is ignored with a warning.
    max_processes : int, optional
        Most actors (each a process, possibly on another node); the samplers are split
        into that many contiguous blocks. Default: the cluster's CPUs / ``num_cpus``
        (at most one actor per sampler).
    read_timeout : float or None
        Seconds to wait for an actor's answer before declaring it hung; None waits forever
        (a dead actor is still reported at once, by Ray). Starting an actor may take
        ``START_TIMEOUT`` s if that is longer.
    restart_on_failure : bool
        Let Ray restart an actor that died or hung (its samplers made again from their
        args, paused ones kept paused); ``step`` then reports its tasks as truncated with
        ``info["worker_restarted"]`` and a ``WorkerRestartWarning``; other calls raise the
        error after the restart. Without it every actor is stopped.
    max_restarts : int
        Restarts Ray allows per actor when ``restart_on_failure`` (Ray's ``max_restarts``;
        -1: no limit).
    num_cpus, num_gpus : float
        Resources of each actor (Ray places it on a node that has them).
    address : str or None
        The Ray cluster: see `kernelgym.collectors.ray.connect` (None: this
        process's connection, else the running cluster, else a new local one).
    ray_init_kwargs : mapping, optional
        More ``ray.init`` arguments when this call connects.

    Raises
    ------
    WorkerError
        When a sampler cannot be made (with the remote traceback).
    ValueError
        When the cluster cannot hold the actors asked for (before any starts).
    """

    def __init__(
        self,
        make_sampler_fn: Callable[..., Any],
        sampler_fn_args: Sequence[Mapping[str, Any]],
        auto_resample_when_done: bool = True,
        multiprocessing_start_method: str | None = None,
        mp_ctx: Any = None,
        max_processes: int | None = None,
        read_timeout: float | None = 60.0,
        restart_on_failure: bool = False,
        *,
        max_restarts: int = -1,
        num_cpus: float = 1,
        num_gpus: float = 0,
        address: str | None = None,
        ray_init_kwargs: Mapping[str, Any] | None = None,
    ):
        self._hosts: list[_GroupHost] = []
        self._waiting = False
        super().__init__(make_sampler_fn, sampler_fn_args, auto_resample_when_done)
        if multiprocessing_start_method is not None or mp_ctx is not None:
            warnings.warn(
                "multiprocessing_start_method and mp_ctx are ignored: Ray starts the actors' processes",
                UserWarning,
                stacklevel=2,
            )
        if max_processes is not None and (
            not isinstance(max_processes, int) or isinstance(max_processes, bool) or max_processes < 1
        ):
            raise ValueError(f"max_processes must be a positive int or None, got {max_processes!r}")
        if read_timeout is not None and not is_seconds(read_timeout):
            raise ValueError(
                f"read_timeout must be a positive number of seconds up to threading.TIMEOUT_MAX or None (no limit), "
                f"got {read_timeout!r}"
            )
        check_max_restarts(max_restarts)
        check_resources(num_cpus, num_gpus)
        self._read_timeout = read_timeout
        self.restart_on_failure = bool(restart_on_failure)
        payloads = self._split(make_sampler_fn, max_processes, num_cpus, address, ray_init_kwargs)
        self._ray_session = faults.session()
        check_fits("sampler actors", len(payloads), num_cpus, num_gpus)
        actor_class = ray.remote(SamplerGroupActor)
        options = dict(
            num_cpus=num_cpus,
            num_gpus=num_gpus,
            max_restarts=max_restarts if self.restart_on_failure else 0,
            max_task_retries=0,  # a lost command is reported, never run twice
        )
        self._update_routes()
        try:
            for index, (name, payload) in enumerate(zip(actor_names("tasks", len(payloads)), payloads)):
                first = self._group_firsts[index]
                count = self._group_size(index)
                actor = actor_class.options(name=name, **options).remote(
                    payload, first, auto_resample_when_done, range(count)
                )
                self._hosts.append(_GroupHost(index, actor, name, first, count))
            deadline = faults.deadline_after(self._start_timeout)
            for host in self._hosts:
                self._check_started(self._startup(host, deadline))
        except BaseException:
            self.close()
            raise

    # -- layout ----------------------------------------------------------------------------------

    def _split(self, make_sampler_fn, max_processes, num_cpus, address, ray_init_kwargs) -> list[bytes]:
        """Contiguous blocks of samplers, one per actor, each cloudpickled with the maker."""
        connect(address, ray_init_kwargs)
        if max_processes is None:
            cpus = ray.cluster_resources().get("CPU", 1.0)
            max_processes = max(1, int(cpus // num_cpus)) if num_cpus else self._num_samplers
        count = min(self._num_samplers, max_processes)
        sizes = [self._num_samplers // count + (a < self._num_samplers % count) for a in range(count)]
        self._group_firsts = [sum(sizes[:a]) for a in range(count)]
        pickled = []
        for first, size in zip(self._group_firsts, sizes):
            try:
                pickled.append(cloudpickle.dumps((make_sampler_fn, self._sampler_fn_args[first : first + size])))
            except Exception as exc:
                raise TypeError(f"make_sampler_fn and sampler_fn_args must be picklable by cloudpickle: {exc}") from exc
        return pickled

    def _group_size(self, index: int) -> int:
        return (self._group_firsts + [self._num_samplers])[index + 1] - self._group_firsts[index]

    # -- talking to the actors ----------------------------------------------------------------------

    @property
    def _start_timeout(self) -> float | None:
        return faults.start_timeout(self._read_timeout)

    def _check_open(self) -> None:
        super()._check_open()
        faults.check_session(self, self._ray_session)

    def _startup(self, host: _GroupHost, deadline: float | None) -> tuple:
        """The actor's construction report, its pid noted; a lost actor as its ``WorkerError``."""
        try:
            data, host.pid = faults.call_once_up(host.actor.ready, host, deadline, self._start_timeout)
        except WorkerError as error:
            return (FAILED, error)
        reply = self._loads(data)
        host.serving = reply[0] == OK
        return reply

    def _check_started(self, reply: tuple) -> None:
        if reply[0] == FAILED:
            error = reply[1] if isinstance(reply[1], WorkerError) else self._remote_error(reply[1])
            raise error from error.__cause__

    @staticmethod
    def _loads(data: bytes) -> tuple:
        try:
            return pickle.loads(data)
        except Exception:  # e.g. a class the driver cannot import: report it, keep the protocol in step
            return (FAILED, [(None, "the driver could not unpickle the reply:\n" + traceback.format_exc(), None)])

    def _remote_error(self, failures: list) -> WorkerError:
        # each failure names the actor (the "process") that hosts its sampler
        return error_from_failures(
            [
                (None if sampler is None else self._group_of(sampler), sampler, text, exception)
                for _, sampler, text, exception in rebuild_failures(None, failures)
            ]
        )

    def _receive(self, host: _GroupHost, deadline: float | None) -> tuple | WorkerError:
        """The actor's oldest owed reply, or the error saying why none will come."""
        try:
            data = faults.get(host.pending[0], host, deadline, self._read_timeout)
        except WorkerError as error:
            host.pending.clear()  # a lost or stopped actor owes nothing more
            return error
        host.pending.popleft()
        return self._loads(data)

    def _gather(
        self, hosts: list[_GroupHost], substitute_lost: bool = False, raise_failures: bool = True
    ) -> tuple[list[Any], dict[int, WorkerError]]:
        """Every actor's reply value, in order, after all have answered (see
        ``VectorSampledTasks``: a lost actor is restarted or every actor is stopped)."""
        deadline = faults.deadline_after(self._read_timeout)
        replies = [self._receive(host, deadline) for host in hosts]
        lost = {host.index: reply for host, reply in zip(hosts, replies) if isinstance(reply, WorkerError)}
        answered = {host.index: reply for host, reply in zip(hosts, replies) if not isinstance(reply, WorkerError)}
        if lost:
            if not self.restart_on_failure:
                for index in lost:  # a hung actor would not answer close()
                    self._hosts[index].serving = False
                    faults.kill(self._hosts[index])
                self.close()
                raise next(iter(lost.values()))
            for index, error in lost.items():
                self._restart(index, error)
            if not substitute_lost:
                raise next(iter(lost.values()))
        failures = [reply[1] for reply in answered.values() if reply[0] == FAILED]
        if failures and raise_failures:
            raise self._remote_error([failure for group in failures for failure in group])
        return [None if host.index in lost else answered[host.index][1] for host in hosts], lost

    def _restart(self, index: int, error: WorkerError) -> None:
        """Wait for Ray to make the lost actor ``index`` again, then pause what was paused."""
        host = self._hosts[index]
        if isinstance(error, faults.WorkerTimeoutError):
            faults.kill(host, restart=True)  # a hung actor is not restarted by Ray on its own
        reply = self._startup(host, faults.deadline_after(self._start_timeout))
        try:
            self._check_started(reply)
            active = [
                sampler - host.first for sampler in self._active if host.first <= sampler < host.first + host.count
            ]
            paused = sorted(set(range(host.count)) - set(active), reverse=True)
            for command, args in [("resume_all", ())] * bool(paused) + [("pause", (local,)) for local in paused]:
                host.send(encode(command, args))
                answer = self._receive(host, faults.deadline_after(self._read_timeout))
                if isinstance(answer, WorkerError):  # lost again: not a reply to index into
                    raise answer
                self._check_started(answer)
        except WorkerError as failure:
            self.close()
            raise WorkerError(f"restarting {host.describe()} failed", **host.fields()) from failure
        error.restarted = True
        warnings.warn(WorkerRestartWarning(str(error)), stacklevel=5)  # the caller of step()

    def _check_ready(self) -> None:
        self._check_open()
        if self._waiting:
            raise RuntimeError("an async_step() is waiting: call wait_step() first")
        # a call interrupted (Ctrl-C) before it read every reply leaves some: skip them
        while behind := [host for host in self._hosts if host.pending]:
            self._gather(behind, substitute_lost=True, raise_failures=False)

    def _command_group(self, group: int, command: str, args: tuple) -> Any:
        self._check_ready()
        host = self._hosts[group]
        host.send(encode(command, args))
        return self._gather([host])[0][0]

    def _broadcast(self, command: str, args_for: Callable[[int, int], tuple]) -> list[Any]:
        self._check_ready()
        messages = [encode(command, args_for(start, stop)) for _, start, stop in self._routes]
        hosts = [self._hosts[group] for group, _, _ in self._routes]
        for host, message in zip(hosts, messages):
            host.send(message)
        return self._gather(hosts)[0]

    # -- public API ----------------------------------------------------------------------------------

    @property
    def num_processes(self) -> int:
        """Number of actors (each one process)."""
        return len(self._hosts)

    def async_step(self, actions: Sequence[Any]) -> None:
        """Send one action per unpaused task; collect the results with ``wait_step``."""
        self._check_ready()
        self._check_actions(actions)
        pack: Callable[[Any], Any] = PackedArray.pack if packable(actions) else lambda part: part
        messages = [encode("step", (pack(actions[start:stop]),)) for _, start, stop in self._routes]
        for (group, _, _), message in zip(self._routes, messages):
            self._hosts[group].send(message)
        self._waiting = True

    def wait_step(self) -> list[RLStepResult]:
        """The results of the last ``async_step`` (see ``step`` for their meaning)."""
        self._check_open()
        if not self._waiting:
            raise RuntimeError("wait_step() needs an async_step() first")
        self._waiting = False
        values, lost = self._gather([self._hosts[group] for group, _, _ in self._routes], substitute_lost=True)
        return self._step_results(values, lost)

    def step(self, actions: Sequence[Any]) -> list[RLStepResult]:
        self.async_step(actions)
        return self.wait_step()

    step.__doc__ = VectorTasksBase.step.__doc__

    def close(self) -> None:
        """Close the samplers and stop every actor; waits at most ``CLOSE_TIMEOUT`` s for them.

        A sampler whose ``close`` raised is reported with a ``RuntimeWarning``. Once this
        returns, Ray reports every actor of this object dead.
        """
        if self._is_closed:
            return
        self._is_closed = True
        self._waiting = False
        if not faults.in_session(getattr(self, "_ray_session", None)):
            return  # never connected, or Ray was shut down: the actors ended with their session
        deadline = faults.deadline_after(CLOSE_TIMEOUT)
        serving = [host for host in self._hosts if host.serving]
        for host in serving:
            host.send(encode("close", ()))
        for host in serving:
            reply = None
            while host.pending and not isinstance(reply, WorkerError):  # the close reply comes last
                reply = self._receive(host, deadline)
            if isinstance(reply, tuple) and reply[0] == FAILED:
                warnings.warn(
                    f"closing the samplers failed: {self._remote_error(reply[1])}", RuntimeWarning, stacklevel=2
                )
        for host in self._hosts:
            faults.kill(host)
        faults.wait_dead(self._hosts, CLOSE_TIMEOUT)

    def __del__(self) -> None:
        # an interpreter at exit may have shut Ray down first: then the actors are gone already
        if ray.is_initialized():
            super().__del__()
