"""The public API: ``VectorSampledTasks`` (worker processes) and
``SingleProcessVectorSampledTasks`` (this process).

Both step many task samplers in lockstep and keep AllenAct's names and semantics
(indices of the ``*_at`` methods count unpaused tasks; pausing shifts later ones down).
The task semantics (auto resampling, held tasks, exhausted samplers) live in
`SamplerGroup`; ``VectorSampledTasks`` runs
one group per worker process (`worker_pool` on this side, `worker_loop` on
theirs, `wire` between them) and adds failure handling:

- an exception in a task or sampler reaches the caller as ``WorkerError`` with the
  sampler's index and the remote traceback, after every other worker has answered;
- a worker that dies or does not answer within ``read_timeout`` seconds is reported as
  ``WorkerCrashedError`` (exit code, signal) or ``WorkerTimeoutError``;
- with ``restart_on_failure`` the lost worker is replaced by a new process whose samplers
  are made again from their ``sampler_fn_args``; otherwise every worker is stopped;
- a ``step`` interrupted while waiting (Ctrl-C) stays pending: the workers apply it and
  ``wait_step()`` returns its results; every other call refuses until then. A call
  interrupted while a message was half sent or read breaks the vector: every later call
  raises, only ``close()`` remains.
"""

from __future__ import annotations

import bisect
import math
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import cloudpickle
import numpy as np

from kernelgym.collectors.processes import get_context, is_seconds
from kernelgym.collectors.sampler_group import SamplerFailures, SamplerGroup
from kernelgym.collectors.tasks import RLStepResult
from kernelgym.collectors.wire import PackedArray, encode, packable, unpack_results
from kernelgym.collectors.worker_errors import WorkerError, error_from_failures
from kernelgym.collectors.worker_pool import WorkerHandle, WorkerPool

RENDER_MODES = ("human", "rgb_array", "raw_rgb_list")


def tile_images(images: Sequence[np.ndarray]) -> np.ndarray:
    """Tile ``(H, W, C)`` images into a near-square grid, row by row, padding with zeros."""
    arrays = [np.asarray(image) for image in images]
    if not arrays:
        raise ValueError("images must hold at least one image, got none")
    if any(array.ndim != 3 or array.shape[2] != arrays[0].shape[2] for array in arrays):
        raise ValueError(f"images must all be (H, W, C) with one C, got shapes {[a.shape for a in arrays]}")
    height = max(array.shape[0] for array in arrays)
    width = max(array.shape[1] for array in arrays)
    columns = math.ceil(math.sqrt(len(arrays)))
    rows = math.ceil(len(arrays) / columns)
    tile = np.zeros((rows * height, columns * width, arrays[0].shape[2]), dtype=arrays[0].dtype)
    for k, array in enumerate(arrays):
        row, column = divmod(k, columns)
        tile[row * height : row * height + array.shape[0], column * width : column * width + array.shape[1]] = array
    return tile


def _show(tile: np.ndarray) -> None:
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(
            "render(mode='human') shows frames with matplotlib: install kernelgym-collectors[render] "
            "or use mode='rgb_array'"
        ) from exc
    plt.figure("kernelgym vector tasks")
    plt.clf()
    plt.imshow(tile)
    plt.axis("off")
    plt.pause(0.001)


class _VectorTasksBase:
    """The public API of both classes; subclasses move commands to their sampler groups.

    A *route* ``(group, start, stop)`` says that positions ``start:stop`` of the unpaused
    tasks live in sampler group ``group``.
    """

    def __init__(
        self,
        make_sampler_fn: Callable[..., Any],
        sampler_fn_args: Sequence[Mapping[str, Any]],
        auto_resample_when_done: bool,
    ):
        if not callable(make_sampler_fn):
            raise TypeError(f"make_sampler_fn must be callable, got {type(make_sampler_fn).__name__}")
        if isinstance(sampler_fn_args, (str, bytes)) or not isinstance(sampler_fn_args, Sequence):
            raise TypeError(f"sampler_fn_args must be a sequence of dicts, got {type(sampler_fn_args).__name__}")
        if len(sampler_fn_args) == 0:
            raise ValueError("sampler_fn_args must describe at least one sampler, got an empty sequence")
        for index, kwargs in enumerate(sampler_fn_args):
            if not isinstance(kwargs, Mapping):
                raise TypeError(f"sampler_fn_args[{index}] must be a dict of keyword args, got {type(kwargs).__name__}")
        if not isinstance(auto_resample_when_done, bool):
            raise TypeError(f"auto_resample_when_done must be a bool, got {auto_resample_when_done!r}")
        self._sampler_fn_args = [dict(kwargs) for kwargs in sampler_fn_args]
        self._num_samplers = len(sampler_fn_args)
        self.auto_resample_when_done = auto_resample_when_done
        self._is_closed = False
        #: why every call but ``close`` must fail (an interruption left the tasks unknown)
        self._broken: str | None = None
        self._owner_pid = os.getpid()
        self._active = list(range(self._num_samplers))  # unpaused sampler indices, in order
        self._group_firsts = [0]  # first sampler index of each group
        self._routes: list[tuple[int, int, int]] = []

    # -- what subclasses provide -----------------------------------------------------------

    def _broadcast(self, command: str, args_for: Callable[[int, int], tuple]) -> list[Any]:
        """Run ``command`` on every group with unpaused tasks; one value per route."""
        raise NotImplementedError

    def _command_group(self, group: int, command: str, args: tuple) -> Any:
        """Run ``command`` on one group."""
        raise NotImplementedError

    # -- bookkeeping --------------------------------------------------------------------------

    def _group_of(self, sampler: int) -> int:
        return bisect.bisect_right(self._group_firsts, sampler) - 1

    def _update_routes(self) -> None:
        routes: list[list[int]] = []
        for position, sampler in enumerate(self._active):
            group = self._group_of(sampler)
            if routes and routes[-1][0] == group:
                routes[-1][2] = position + 1
            else:
                routes.append([group, position, position + 1])
        self._routes = [(group, start, stop) for group, start, stop in routes]

    def _check_open(self) -> None:
        if self._is_closed:
            raise RuntimeError(f"this {type(self).__name__} is closed")
        if self._broken is not None:
            raise RuntimeError(
                f"this {type(self).__name__} is broken: {self._broken}, so the tasks' state is unknown; "
                "call close() and make a new instance"
            )

    def _position(self, sampler_index: int) -> tuple[int, int]:
        """(group, local index) of the ``sampler_index``-th unpaused task."""
        if not isinstance(sampler_index, (int, np.integer)) or isinstance(sampler_index, bool):
            raise TypeError(f"sampler_index must be an int, got {type(sampler_index).__name__}")
        if not 0 <= sampler_index < len(self._active):
            raise ValueError(f"sampler_index must be in [0, {len(self._active)}) (unpaused tasks), got {sampler_index}")
        sampler = self._active[sampler_index]
        group = self._group_of(sampler)
        return group, sampler - self._group_firsts[group]

    def _per_task(self, name: str, values: Any) -> list[Any]:
        """One value per unpaused task from a single value (a str or None) or a list of them."""
        if values is None or isinstance(values, str):
            return [values] * len(self._active)
        values = list(values)
        if len(values) != len(self._active):
            raise ValueError(f"{name} must have one entry per unpaused task ({len(self._active)}), got {len(values)}")
        return values

    def _concat(self, command: str, args_for: Callable[[int, int], tuple]) -> list[Any]:
        return [item for values in self._broadcast(command, args_for) for item in values]

    def _step_results(self, values: list, lost: dict) -> list[RLStepResult]:
        """One step's results from each route's packed reply; a group whose worker was lost and
        restarted (reply None) reports its samplers done, with their new first observations."""
        results: list[RLStepResult] = []
        for (group, _, _), value in zip(self._routes, values):
            if value is None:
                info = {"worker_restarted": lost[group]}
                observations = self._command_group(group, "get_observations", ())
                results.extend(RLStepResult(obs, 0.0, True, dict(info), False, True) for obs in observations)
            else:
                results.extend(unpack_results(value))
        return self._resample_if_all_done(results)

    def _resample_if_all_done(self, results: list[RLStepResult]) -> list[RLStepResult]:
        """Without auto resampling, new tasks start once every unpaused task has finished."""
        if self.auto_resample_when_done or not results or not all(result.done for result in results):
            return results
        observations = self.next_task()
        return [
            result.clone(observation=observation, info={**(result.info or {}), "final_observation": result.observation})
            for result, observation in zip(results, observations)
        ]

    # -- public API ----------------------------------------------------------------------------

    @property
    def is_closed(self) -> bool:
        """Has the vector task been closed."""
        return self._is_closed

    @property
    def num_unpaused_tasks(self) -> int:
        """Number of unpaused tasks."""
        return len(self._active)

    def next_task(self, **kwargs: Any) -> list[Any]:
        """Move every unpaused sampler to its next task.

        Parameters
        ----------
        **kwargs
            Passed to each sampler's ``next_task``.

        Returns
        -------
        list
            The new tasks' first observations (None for an exhausted sampler).
        """
        return self._concat("next_task", lambda start, stop: (kwargs,))

    def get_observations(self) -> list[Any]:
        """The current observation of every unpaused task."""
        return self._concat("get_observations", lambda start, stop: ())

    def command_at(self, sampler_index: int, command: str, data: Any | None = None) -> Any:
        """Run ``command`` on one task and return its result.

        Parameters
        ----------
        sampler_index : int
            Index among the unpaused tasks.
        command : str
            One of ``step`` (data: action), ``next_task`` (data: kwargs), ``get_observations``,
            ``call`` (data: ``(name, args)``), ``attr`` (data: name), ``render`` (data:
            ``(mode, args, kwargs)``), ``sampler_call`` / ``sampler_attr`` (as call / attr, on
            the task sampler), ``set_seed`` (data: seed) or ``reset`` (restart the sampler).
        data : Any, optional
            The command's argument.
        """
        self._check_open()
        if command not in SamplerGroup.COMMANDS_AT:
            raise ValueError(f"command must be one of {sorted(SamplerGroup.COMMANDS_AT)}, got {command!r}")
        group, local = self._position(sampler_index)
        return self._command_group(group, "run_at", (local, command, data))

    def call_at(self, sampler_index: int, function_name: str, function_args: list[Any] | None = None) -> Any:
        """Call the task's method ``function_name`` with ``function_args`` and return the result."""
        return self.command_at(sampler_index, "call", (function_name, function_args))

    def attr_at(self, sampler_index: int, attr_name: str) -> Any:
        """The task's attribute ``attr_name``."""
        return self.command_at(sampler_index, "attr", attr_name)

    def next_task_at(self, sampler_index: int) -> list[Any]:
        """Move one sampler to its next task; a list holding the new task's first observation."""
        return [self.command_at(sampler_index, "next_task", {})]

    def step_at(self, sampler_index: int, action: Any) -> list[RLStepResult]:
        """Step one task; a list holding its ``RLStepResult``.

        A task finishing here is resampled (``auto_resample_when_done``) or held; the
        all-tasks-finished resampling of ``step`` does not apply.
        """
        return [self.command_at(sampler_index, "step", action)]

    def step(self, actions: Sequence[Any]) -> list[RLStepResult]:
        """Step every unpaused task.

        Parameters
        ----------
        actions : sequence
            One action per unpaused task.

        Returns
        -------
        list of RLStepResult
            One per unpaused task. With ``auto_resample_when_done=False`` a finished task
            is held (its action ignored, its final result repeated with reward 0 and
            ``info["task_held"]``) until every unpaused task has finished; in that step all
            of them start new tasks and return those tasks' first observations, the final
            ones being in ``info["final_observation"]``.
        """
        self._check_open()
        self._check_actions(actions)
        results = self._concat("step", lambda start, stop: (actions[start:stop],))
        return self._resample_if_all_done(results)

    def _check_actions(self, actions: Sequence[Any]) -> None:
        if isinstance(actions, (str, bytes, Mapping)):  # sized, but one action per character or key is a mistake
            raise TypeError(
                f"actions must be a sequence (one per unpaused task), got {type(actions).__name__} {actions!r:.80}"
            )
        try:
            count = len(actions)
        except TypeError:
            raise TypeError(
                f"actions must be a sequence (one per unpaused task), got {type(actions).__name__}"
            ) from None
        if count != len(self._active):
            raise ValueError(f"actions must hold one action per unpaused task ({len(self._active)}), got {count}")

    def reset_all(self) -> None:
        """Reset every unpaused sampler to its initial state (not its RNG) and sample a task."""
        self._broadcast("reset_all", lambda start, stop: ())

    def set_seeds(self, seeds: Sequence[int]) -> None:
        """Seed each unpaused sampler; the seeds apply from its next task on.

        Parameters
        ----------
        seeds : sequence of int
            One seed per unpaused task.
        """
        if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence):
            raise TypeError(f"seeds must be a sequence of ints, got {type(seeds).__name__}")
        seeds = self._per_task("seeds", seeds)
        for seed in seeds:
            if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
                raise TypeError(f"seeds must be ints, got {seed!r}")
        self._broadcast("set_seeds", lambda start, stop: (seeds[start:stop],))

    def pause_at(self, sampler_index: int) -> None:
        """Pause one task without destroying it; later indices shift down by one."""
        self._check_open()
        group, local = self._position(sampler_index)
        self._command_group(group, "pause", (local,))
        del self._active[sampler_index]
        self._update_routes()

    def resume_all(self) -> None:
        """Resume every paused task."""
        self._check_open()
        for group in range(len(self._group_firsts)):
            self._command_group(group, "resume_all", ())
        self._active = list(range(self._num_samplers))
        self._update_routes()

    def call(self, function_names: str | list[str], function_args_list: list[Any] | None = None) -> list[Any]:
        """Call a method on every unpaused task.

        Parameters
        ----------
        function_names : str or list of str
            One name for all tasks, or one per task.
        function_args_list : list, optional
            One argument list per task.
        """
        names = self._per_task("function_names", function_names)
        args_list = self._per_task("function_args_list", function_args_list)
        return self._concat("call", lambda start, stop: (names[start:stop], args_list[start:stop]))

    def attr(self, attr_names: str | list[str]) -> list[Any]:
        """An attribute of every unpaused task (one name for all, or one per task)."""
        names = self._per_task("attr_names", attr_names)
        return self._concat("attr", lambda start, stop: (names[start:stop],))

    def render(self, mode: str = "human", *args: Any, **kwargs: Any) -> np.ndarray | None | list[np.ndarray]:
        """Render every unpaused task (each as ``task.render("rgb_array", ...)``).

        Parameters
        ----------
        mode : {"human", "rgb_array", "raw_rgb_list"}
            Show the tiled frames (matplotlib), return them tiled, or return the list.
        """
        if mode not in RENDER_MODES:
            raise ValueError(f"mode must be one of {RENDER_MODES}, got {mode!r}")
        frames = self._concat("render", lambda start, stop: ("rgb_array", args, kwargs))
        if mode == "raw_rgb_list":
            return frames
        tile = tile_images(frames)
        if mode == "rgb_array":
            return tile
        _show(tile)
        return None

    def close(self) -> None:
        """Close every sampler (and stop the workers)."""
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __del__(self) -> None:
        # a forked child that inherited this object must not close the parent's workers
        if getattr(self, "_is_closed", True) is False and self._owner_pid == os.getpid():
            self.close()


class SingleProcessVectorSampledTasks(_VectorTasksBase):
    """Many task samplers stepped in lockstep in this process.

    Parameters
    ----------
    make_sampler_fn : callable
        Makes one task sampler from keyword arguments.
    sampler_fn_args : sequence of dict
        The keyword arguments of each sampler.
    auto_resample_when_done : bool
        Replace a finished task by its sampler's next one in the same step; if False, a
        finished task is held until all tasks have finished (see ``step``).
    """

    def __init__(
        self,
        make_sampler_fn: Callable[..., Any],
        sampler_fn_args: Sequence[Mapping[str, Any]],
        auto_resample_when_done: bool = True,
    ):
        super().__init__(make_sampler_fn, sampler_fn_args, auto_resample_when_done)
        try:
            self._group = SamplerGroup(make_sampler_fn, self._sampler_fn_args, 0, auto_resample_when_done)
        except SamplerFailures as exc:
            self._is_closed = True
            error = self._local_error(exc)
            raise error from error.__cause__
        self._update_routes()

    def _local_error(self, exc: SamplerFailures) -> WorkerError:
        return error_from_failures([(None, f.sampler_index, f.traceback_text, f.exception) for f in exc.failures])

    def _command_group(self, group: int, command: str, args: tuple) -> Any:
        self._check_open()
        try:
            return getattr(self._group, command)(*args)
        except SamplerFailures as exc:
            error = self._local_error(exc)
            raise error from error.__cause__
        except Exception:
            raise
        except BaseException as exc:  # Ctrl-C inside user code: some samplers ran the call, some not
            self._broken = f"{command}() was interrupted ({type(exc).__name__}) inside the tasks' code"
            raise

    def _broadcast(self, command: str, args_for: Callable[[int, int], tuple]) -> list[Any]:
        self._check_open()
        return [self._command_group(0, command, args_for(0, len(self._active)))] if self._active else []

    def close(self) -> None:
        if self._is_closed:
            return
        self._is_closed = True
        try:
            self._group.close()
        except SamplerFailures as exc:
            error = self._local_error(exc)
            raise error from error.__cause__


def default_max_processes() -> int:
    """One worker process per usable CPU but one, which the parent (the learner) keeps.

    A round trip to a worker costs far more than a light environment's step, so fewer,
    fuller processes win until the CPUs are busy (see benchmarks/bench_vector_tasks.py).
    """
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cpus - 1)


class VectorSampledTasks(_VectorTasksBase):
    """Many task samplers stepped in lockstep in worker processes.

    Each worker process hosts a contiguous block of samplers (``max_processes`` caps the
    number of processes), so one message per process and step carries all its tasks.

    Parameters
    ----------
    make_sampler_fn : callable
        Makes one task sampler from keyword arguments (cloudpickled: lambdas work).
    sampler_fn_args : sequence of dict
        The keyword arguments of each sampler.
    auto_resample_when_done : bool
        Replace a finished task by its sampler's next one in the same step; if False, a
        finished task is held until all tasks have finished (see ``step``).
    multiprocessing_start_method : {"forkserver", "spawn", "fork"} or None
        How workers start (None: the platform default). "forkserver" works well with
        CUDA; "fork" starts fastest but must happen before the parent uses a GPU.
    mp_ctx : multiprocessing context, optional
        Used instead of ``multiprocessing_start_method``.
    max_processes : int, optional
        Most worker processes; default ``default_max_processes()``: one per usable CPU but
        one (at most one per sampler). Heavy environments may want one per sampler.
    read_timeout : float or None
        Seconds to wait for a worker's answer before declaring it hung; None waits forever
        (a dead worker is still detected at once).
    restart_on_failure : bool
        Replace a worker that died or hung by a new one (its samplers made again from their
        args) instead of stopping all; ``step`` then reports its tasks as truncated, starting
        new tasks, with ``info["worker_restarted"]`` and a ``WorkerRestartWarning``; other
        calls raise the error after the restart.

    Raises
    ------
    WorkerError
        When a sampler cannot be made (with the remote traceback).
    """

    _pool: WorkerPool  # started in __init__ (close() copes with an __init__ that failed first)

    def __init__(
        self,
        make_sampler_fn: Callable[..., Any],
        sampler_fn_args: Sequence[Mapping[str, Any]],
        auto_resample_when_done: bool = True,
        multiprocessing_start_method: str | None = "forkserver",
        mp_ctx: Any = None,
        max_processes: int | None = None,
        read_timeout: float | None = 60.0,
        restart_on_failure: bool = False,
    ):
        self._waiting = False
        self._step_interrupted = False
        super().__init__(make_sampler_fn, sampler_fn_args, auto_resample_when_done)
        if mp_ctx is None:
            mp_ctx = get_context(multiprocessing_start_method, argument="multiprocessing_start_method")
        if max_processes is not None and (
            not isinstance(max_processes, int) or isinstance(max_processes, bool) or max_processes < 1
        ):
            raise ValueError(f"max_processes must be a positive int or None, got {max_processes!r}")
        if read_timeout is not None and not is_seconds(read_timeout):
            raise ValueError(
                f"read_timeout must be a positive number of seconds up to threading.TIMEOUT_MAX or None (no limit), "
                f"got {read_timeout!r}"
            )

        num_processes = min(self._num_samplers, max_processes or default_max_processes())
        sizes = [
            self._num_samplers // num_processes + (p < self._num_samplers % num_processes) for p in range(num_processes)
        ]
        self._group_firsts = [sum(sizes[:p]) for p in range(num_processes)]
        payloads = []
        for first, size in zip(self._group_firsts, sizes):
            try:
                payloads.append(cloudpickle.dumps((make_sampler_fn, self._sampler_fn_args[first : first + size])))
            except Exception as exc:
                raise TypeError(f"make_sampler_fn and sampler_fn_args must be picklable by cloudpickle: {exc}") from exc
        self._update_routes()
        self._pool = WorkerPool(
            mp_ctx,
            payloads,
            self._group_firsts,
            self._num_samplers,
            auto_resample_when_done,
            read_timeout,
            bool(restart_on_failure),
            self._active_of,
        )
        try:
            self._guarded(self._pool.start)
        except BaseException:
            self.close()
            raise

    # -- talking to the pool -------------------------------------------------------------------

    def _active_of(self, worker: WorkerHandle) -> list[int]:
        """The local indices of ``worker``'s unpaused samplers."""
        return [
            sampler - worker.first for sampler in self._active if worker.first <= sampler < worker.first + worker.count
        ]

    def _guarded(self, call: Callable[[], Any]) -> Any:
        """``call()``; the vector closes when the pool lost a worker it did not replace,
        and is broken when an interruption left the pipes out of step."""
        try:
            return call()
        except BaseException:
            if self._pool.failed:
                self.close()
            elif self._pool.broken is not None:
                self._broken = self._pool.broken
            raise

    def _check_ready(self) -> None:
        self._check_open()
        if self._step_interrupted:
            raise RuntimeError(
                "a step was interrupted (KeyboardInterrupt) while waiting for its results; the workers "
                "apply it all the same: call wait_step() to receive its results, or close()"
            )
        if self._waiting:
            raise RuntimeError("an async_step() is waiting: call wait_step() first")

    def _command_group(self, group: int, command: str, args: tuple) -> Any:
        self._check_ready()
        worker = self._pool.workers[group]
        self._guarded(lambda: self._pool.command([worker], command, [args]))
        return self._gather_or_break(command, [worker])[0]

    def _broadcast(self, command: str, args_for: Callable[[int, int], tuple]) -> list[Any]:
        self._check_ready()
        workers = [self._pool.workers[group] for group, _, _ in self._routes]
        args = [args_for(start, stop) for _, start, stop in self._routes]
        self._guarded(lambda: self._pool.command(workers, command, args))
        return self._gather_or_break(command, workers)

    def _gather_or_break(self, command: str, workers: list[WorkerHandle]) -> list[Any]:
        """The workers' replies to ``command`` (not a step); interrupted while waiting, the
        vector is broken: the workers carry the command out, but what it changed and
        returned is lost (only ``step`` can be resumed, by ``wait_step``)."""
        try:
            return self._guarded(lambda: self._pool.gather(workers))[0]
        except Exception:
            raise
        except BaseException as exc:
            self._broken = (
                self._broken or f"{command}() was interrupted ({type(exc).__name__}) while waiting for the workers"
            )
            raise

    # -- public API ----------------------------------------------------------------------------

    @property
    def mp_ctx(self) -> Any:
        """The multiprocessing context the workers run in."""
        return self._pool.mp_ctx

    @property
    def restart_on_failure(self) -> bool:
        """Whether a lost worker is replaced (see the class docstring)."""
        return self._pool.restart_on_failure

    @restart_on_failure.setter
    def restart_on_failure(self, value: bool) -> None:
        self._pool.restart_on_failure = bool(value)

    @property
    def num_processes(self) -> int:
        """Number of worker processes."""
        return len(self._pool.workers)

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the workers (new ones after a restart)."""
        return [worker.process.pid for worker in self._pool.workers]

    def async_step(self, actions: Sequence[Any]) -> None:
        """Send one action per unpaused task; collect the results with ``wait_step``."""
        self._check_ready()
        self._check_actions(actions)
        pack: Callable[[Any], Any] = PackedArray.pack if packable(actions) else lambda part: part
        workers = [self._pool.workers[group] for group, _, _ in self._routes]
        messages = [encode("step", (pack(actions[start:stop]),)) for _, start, stop in self._routes]
        self._guarded(lambda: self._pool.send(workers, messages))
        self._waiting = True

    def wait_step(self) -> list[RLStepResult]:
        """The results of the last ``async_step`` (see ``step`` for their meaning).

        Also the results of a ``step`` or ``wait_step`` that was interrupted (Ctrl-C)
        while waiting: the workers applied that step, and it is the one returned here.
        """
        self._check_open()
        if not self._waiting:
            raise RuntimeError("wait_step() needs an async_step() first")
        workers = [self._pool.workers[group] for group, _, _ in self._routes]
        try:
            values, lost = self._guarded(lambda: self._pool.gather(workers, substitute_lost=True))
        except Exception:
            self._waiting = self._step_interrupted = False
            raise
        except BaseException:  # KeyboardInterrupt: the step stays pending (see _check_ready)
            self._step_interrupted = self._broken is None
            raise
        self._waiting = self._step_interrupted = False
        return self._step_results(values, lost)

    def step(self, actions: Sequence[Any]) -> list[RLStepResult]:
        self.async_step(actions)
        return self.wait_step()

    step.__doc__ = _VectorTasksBase.step.__doc__

    def close(self) -> None:
        """Close the samplers and stop every worker; waits at most
        ``worker_pool.CLOSE_TIMEOUT`` s for them.

        A sampler whose ``close`` raised is reported with a ``RuntimeWarning``.
        """
        if self._is_closed:
            return
        self._is_closed = True
        self._waiting = self._step_interrupted = False
        pool = getattr(self, "_pool", None)  # None: __init__ failed before it started the pool
        if pool is None:
            return
        for error in pool.close():
            warnings.warn(f"closing the samplers failed: {error}", RuntimeWarning, stacklevel=2)
