"""``SamplerGroup``: task samplers stepped in lockstep inside one process (the task semantics).

It is the whole of ``SingleProcessVectorSampledTasks`` and the body of each worker of
``VectorSampledTasks``, so both classes share one implementation of the task semantics:

- every sampler hands out its first task at construction;
- with ``auto_resample_when_done`` a finished task is replaced by the sampler's next one
  in the step that finished it, and that step's observation is the new task's first
  observation (the finished task's last one is in ``info["final_observation"]``);
- otherwise a finished task is *held*: later steps ignore its action and repeat its final
  result with reward 0 and ``info["task_held"] = True`` until the caller samples new
  tasks (``VectorSampledTasks.step`` does so once every unpaused task has finished);
- a sampler that returns no task (exhausted) is held with observation None.

Errors in user code are collected per sampler (``SamplerFailures``) so that the caller
learns which sampler raised, with its traceback, after every other sampler was served.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kernelgym.collectors.tasks import RLStepResult, TaskSamplerProtocol


class SamplerFailure:
    """One exception raised by a sampler's or task's code, with its formatted traceback."""

    __slots__ = ("sampler_index", "exception", "traceback_text")

    def __init__(self, sampler_index: int | None, exception: BaseException):
        self.sampler_index = sampler_index
        self.exception = exception
        self.traceback_text = "".join(traceback.format_exception(exception))


class SamplerFailures(Exception):
    """Raised by a ``SamplerGroup`` method after every sampler was served."""

    def __init__(self, failures: list[SamplerFailure]):
        self.failures = failures
        super().__init__(f"{len(failures)} sampler(s) failed")


class SamplerGroup:
    """Task samplers ``first_index .. first_index + len(sampler_fn_args) - 1`` in this process.

    Methods that act on "active" samplers see only the unpaused ones, in index order.
    """

    #: methods a worker process may be asked to run
    COMMANDS = frozenset(
        {
            "step",
            "next_task",
            "get_observations",
            "reset_all",
            "set_seeds",
            "call",
            "attr",
            "render",
            "run_at",
            "pause",
            "resume_all",
            "close",
        }
    )
    #: commands of ``run_at`` (``VectorSampledTasks.command_at``)
    COMMANDS_AT = frozenset(
        {
            "step",
            "next_task",
            "get_observations",
            "call",
            "attr",
            "render",
            "sampler_call",
            "sampler_attr",
            "set_seed",
            "reset",
        }
    )

    def __init__(
        self,
        make_sampler_fn: Callable[..., Any],
        sampler_fn_args: Sequence[Mapping[str, Any]],
        first_index: int,
        auto_resample_when_done: bool,
        active: Sequence[int] | None = None,
    ):
        self.first_index = first_index
        self.auto_resample_when_done = auto_resample_when_done
        self._samplers: list[Any] = []
        self._tasks: list[Any] = [None] * len(sampler_fn_args)
        # a held slot stores the result its later steps repeat (see the module docstring)
        self._held: list[RLStepResult | None] = [None] * len(sampler_fn_args)
        try:
            for local, kwargs in enumerate(sampler_fn_args):
                sampler = self._guard(local, make_sampler_fn, **kwargs)
                if not isinstance(sampler, TaskSamplerProtocol):
                    failure = TypeError(
                        "make_sampler_fn must return a TaskSampler (next_task, set_seed, reset, close), "
                        f"got {type(sampler).__name__}"
                    )
                    raise SamplerFailures([SamplerFailure(first_index + local, failure)])
                self._samplers.append(sampler)
            for local in range(len(self._samplers)):
                self._sample_next(local, {})
        except SamplerFailures:
            for sampler in self._samplers:  # release what was made; the first failure is the news
                try:
                    sampler.close()
                except Exception:
                    pass
            raise
        self._active = list(range(len(self._samplers))) if active is None else list(active)

    # -- helpers ---------------------------------------------------------------------

    def _guard(self, local: int, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call user code for sampler ``local``; a failure names that sampler."""
        try:
            return function(*args, **kwargs)
        except Exception as exc:
            raise SamplerFailures([SamplerFailure(self.first_index + local, exc)]) from exc

    def _each_active(self, function: Callable[[int, Any], Any], data: Sequence[Any] | None = None) -> list[Any]:
        """``function(local, item)`` for every active sampler, failures collected, not stopping."""
        results: list[Any] = []
        failures: list[SamplerFailure] = []
        items = data if data is not None else [None] * len(self._active)
        for local, item in zip(self._active, items):
            try:
                results.append(function(local, item))
            except SamplerFailures as exc:
                failures.extend(exc.failures)
                results.append(None)
            except Exception as exc:
                failures.append(SamplerFailure(self.first_index + local, exc))
                results.append(None)
        if failures:
            raise SamplerFailures(failures)
        return results

    def _sample_next(self, local: int, kwargs: Mapping[str, Any]) -> Any:
        """Replace sampler ``local``'s task by its next one; returns its first observation."""
        task = self._guard(local, self._samplers[local].next_task, **kwargs)
        self._tasks[local] = task
        if task is None:
            self._held[local] = RLStepResult(None, 0.0, True, {"task_held": True}, False, True)
            return None
        self._held[local] = None
        return self._guard(local, task.get_observations)

    def _task(self, local: int) -> Any:
        task = self._tasks[local]
        if task is None:
            raise LookupError(f"sampler {self.first_index + local} has no task: it is exhausted")
        return task

    # -- per-sampler operations --------------------------------------------------------

    def _step_one(self, local: int, action: Any) -> RLStepResult:
        held = self._held[local]
        if held is not None:
            return held
        task = self._tasks[local]
        result = task.step(action)
        if not result.done:
            return result
        info = dict(result.info or {})
        metrics = getattr(task, "metrics", None)
        if metrics is not None:
            info["task_metrics"] = metrics()
        if self.auto_resample_when_done:
            info["final_observation"] = result.observation
            return result.clone(observation=self._sample_next(local, {}), info=info)
        self._held[local] = result.clone(reward=0.0, info={"task_held": True})
        return result.clone(info=info)

    def _run_at(self, local: int, command: str, data: Any) -> Any:
        if command == "step":
            return self._step_one(local, data)
        if command == "next_task":
            return self._sample_next(local, data or {})
        if command == "get_observations":
            task = self._tasks[local]
            return None if task is None else task.get_observations()
        if command == "call":
            name, args = data
            return getattr(self._task(local), name)(*(args or ()))
        if command == "attr":
            return getattr(self._task(local), data)
        if command == "render":
            mode, args, kwargs = data
            return self._task(local).render(mode, *args, **kwargs)
        if command == "sampler_call":
            name, args = data
            return getattr(self._samplers[local], name)(*(args or ()))
        if command == "sampler_attr":
            return getattr(self._samplers[local], data)
        if command == "set_seed":
            return self._samplers[local].set_seed(data)
        if command == "reset":
            self._samplers[local].reset()
            return self._sample_next(local, {})
        raise ValueError(f"command must be one of {sorted(self.COMMANDS_AT)}, got {command!r}")

    # -- commands (all act on the active samplers, in order) ----------------------------

    def step(self, actions: Sequence[Any]) -> list[RLStepResult]:
        """One step of every active task; ``actions`` aligned with the active samplers."""
        return self._each_active(self._step_one, actions)

    def next_task(self, kwargs: Mapping[str, Any]) -> list[Any]:
        return self._each_active(lambda local, _: self._sample_next(local, kwargs))

    def get_observations(self) -> list[Any]:
        return self._each_active(lambda local, _: self._run_at(local, "get_observations", None))

    def reset_all(self) -> None:
        self._each_active(lambda local, _: self._run_at(local, "reset", None))

    def set_seeds(self, seeds: Sequence[int]) -> None:
        self._each_active(lambda local, seed: self._samplers[local].set_seed(seed), seeds)

    def call(self, names: Sequence[str], args_list: Sequence[Any]) -> list[Any]:
        pairs = list(zip(names, args_list))
        return self._each_active(lambda local, pair: self._run_at(local, "call", pair), pairs)

    def attr(self, names: Sequence[str]) -> list[Any]:
        return self._each_active(lambda local, name: getattr(self._task(local), name), names)

    def render(self, mode: str, args: tuple, kwargs: dict) -> list[Any]:
        return self._each_active(lambda local, _: self._run_at(local, "render", (mode, args, kwargs)))

    def run_at(self, local: int, command: str, data: Any) -> Any:
        """``command`` on sampler ``local`` (paused or not)."""
        return self._guard(local, self._run_at, local, command, data)

    def pause(self, local: int) -> None:
        self._active.remove(local)

    def resume_all(self) -> None:
        self._active = list(range(len(self._samplers)))

    def close(self) -> None:
        """Close every sampler, even when some raise."""
        failures = []
        for local, sampler in enumerate(self._samplers):
            try:
                sampler.close()
            except Exception as exc:
                failures.append(SamplerFailure(self.first_index + local, exc))
        if failures:
            raise SamplerFailures(failures)
