"""The task protocol that vector tasks drive: ``RLStepResult``, ``Task`` and ``TaskSampler``.

A *task* is one episode of an environment (AllenAct's vocabulary); a *task sampler*
hands out tasks one after another. ``VectorSampledTasks`` only relies on the small
structural protocols ``TaskProtocol`` and ``TaskSamplerProtocol``; the abstract base
classes ``Task`` and ``TaskSampler`` implement the bookkeeping (step counts, step limits,
metrics) so that a concrete task only writes ``_step`` and ``get_observations``.
"""

from __future__ import annotations

import abc
from typing import Any, NamedTuple, Protocol, runtime_checkable


class _StepFields(NamedTuple):
    observation: Any
    reward: Any
    done: bool
    info: dict[str, Any] | None
    terminated: bool
    truncated: bool


class RLStepResult(_StepFields):
    """What one step of a task returns.

    Parameters
    ----------
    observation : Any
        The observation after the step (for a resampled task: the next task's first one).
    reward : float or array
        The reward of the step.
    done : bool
        ``terminated or truncated``; checked against them.
    info : dict or None
        Extra information.
    terminated : bool, optional
        The episode reached a terminal state. Defaults to ``done and not truncated``.
    truncated : bool, optional
        The episode was cut short (step limit, failure). Defaults to False.

    Raises
    ------
    ValueError
        When ``done`` differs from ``terminated or truncated``.
    """

    __slots__ = ()

    def __new__(
        cls,
        observation: Any,
        reward: Any,
        done: bool,
        info: dict[str, Any] | None = None,
        terminated: bool | None = None,
        truncated: bool = False,
    ) -> RLStepResult:
        done = bool(done)
        truncated = bool(truncated)
        terminated = (done and not truncated) if terminated is None else bool(terminated)
        if done != (terminated or truncated):
            raise ValueError(
                f"done must equal terminated or truncated: got done={done}, "
                f"terminated={terminated}, truncated={truncated}"
            )
        return super().__new__(cls, observation, reward, done, info, terminated, truncated)

    def clone(self, **changes: Any) -> RLStepResult:
        """A copy with some fields replaced (validated like a new result)."""
        return RLStepResult(**{**self._asdict(), **changes})


@runtime_checkable
class TaskProtocol(Protocol):
    """What a vector of tasks calls on a task."""

    def step(self, action: Any) -> RLStepResult: ...

    def get_observations(self, **kwargs: Any) -> Any: ...

    def is_done(self) -> bool: ...


@runtime_checkable
class TaskSamplerProtocol(Protocol):
    """What a vector of tasks calls on a task sampler."""

    def next_task(self, **kwargs: Any) -> TaskProtocol | None: ...

    def set_seed(self, seed: int) -> None: ...

    def reset(self) -> None: ...

    def close(self) -> None: ...


class Task(abc.ABC):
    """One episode: counts steps, enforces ``max_steps`` (as truncation) and sums rewards.

    Subclasses implement ``action_space``, ``get_observations`` and ``_step``; they may
    override ``reached_terminal_state`` (by default: the last step said terminated).

    Parameters
    ----------
    env : Any, optional
        The environment the task runs in.
    task_info : dict, optional
        Free-form description of the task.
    max_steps : int, optional
        Steps after which the task is truncated; None for no limit.
    """

    def __init__(self, env: Any = None, task_info: dict[str, Any] | None = None, max_steps: int | None = None):
        if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
            raise ValueError(f"max_steps must be a positive int or None, got {max_steps!r}")
        self.env = env
        self.task_info = dict(task_info or {})
        self.max_steps = max_steps
        self._num_steps_taken = 0
        self._total_reward: Any = 0.0
        self._terminated = False
        self._truncated = False

    @property
    @abc.abstractmethod
    def action_space(self) -> Any:
        """The space actions are drawn from."""

    @property
    def observation_space(self) -> Any:
        """The space of observations, None when unknown."""
        return None

    @abc.abstractmethod
    def get_observations(self, **kwargs: Any) -> Any:
        """The current observation."""

    @abc.abstractmethod
    def _step(self, action: Any) -> RLStepResult:
        """Advance the environment by one action."""

    def reached_terminal_state(self) -> bool:
        """Whether the episode ended in a terminal state."""
        return self._terminated

    def reached_max_steps(self) -> bool:
        """Whether ``max_steps`` steps were taken."""
        return self.max_steps is not None and self._num_steps_taken >= self.max_steps

    def is_done(self) -> bool:
        """Whether the task finished (terminated or truncated)."""
        return self.reached_terminal_state() or self._truncated or self.reached_max_steps()

    def num_steps_taken(self) -> int:
        """Steps taken in this task."""
        return self._num_steps_taken

    def step(self, action: Any) -> RLStepResult:
        """Take one step; the step that reaches ``max_steps`` comes back truncated.

        Raises
        ------
        RuntimeError
            When the task is already done.
        """
        if self.is_done():
            raise RuntimeError(f"cannot step a finished {type(self).__name__}; sample the next task")
        result = self._step(action)
        self._num_steps_taken += 1
        self._total_reward = self._total_reward + result.reward
        if not result.done and self.reached_max_steps():
            result = result.clone(done=True, terminated=False, truncated=True)
        self._terminated = result.terminated
        self._truncated = result.truncated
        return result

    def metrics(self) -> dict[str, Any]:
        """Summary of the episode so far: its length and total reward."""
        return {"ep_length": self._num_steps_taken, "reward": self._total_reward}

    def render(self, mode: str = "rgb_array", *args: Any, **kwargs: Any) -> Any:
        """An image of the task; tasks that can draw themselves override this."""
        raise NotImplementedError(f"{type(self).__name__} does not render")

    def close(self) -> None:  # noqa: B027 (an optional hook: doing nothing is the right default)
        """Release what the task holds (nothing by default; samplers own environments)."""


class TaskSampler(abc.ABC):
    """Hands out tasks one after another."""

    @property
    @abc.abstractmethod
    def length(self) -> int | float:
        """Tasks left to sample; ``float('inf')`` for an endless sampler."""

    @property
    @abc.abstractmethod
    def last_sampled_task(self) -> Task | None:
        """The task that ``next_task`` returned last, None before the first."""

    @abc.abstractmethod
    def next_task(self, **kwargs: Any) -> Task | None:
        """The next task, or None when the sampler is exhausted."""

    @abc.abstractmethod
    def set_seed(self, seed: int) -> None:
        """Seed the randomness of the tasks sampled from now on."""

    @abc.abstractmethod
    def reset(self) -> None:
        """Start the sequence of tasks over (the random state is kept)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the sampler's environments."""

    @property
    def all_observation_spaces_equal(self) -> bool:
        """Whether every task shares one observation space."""
        return True
