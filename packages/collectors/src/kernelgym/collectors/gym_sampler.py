"""``GymTaskSampler``: any gymnasium environment as a ``TaskSampler``; one episode is one task."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym

from kernelgym.collectors.tasks import RLStepResult, Task, TaskSampler


class GymTask(Task):
    """One episode of a gymnasium environment (the environment belongs to the sampler).

    Parameters
    ----------
    env : gymnasium.Env
        The environment, already reset.
    observation : Any
        The observation ``env.reset`` returned.
    info : dict
        The info ``env.reset`` returned (kept as ``task_info``).
    max_steps : int, optional
        Steps after which the task is truncated.
    """

    def __init__(self, env: gym.Env, observation: Any, info: dict[str, Any], max_steps: int | None = None):
        super().__init__(env=env, task_info=info, max_steps=max_steps)
        self._observation = observation

    @property
    def action_space(self) -> gym.Space:
        return self.env.action_space

    @property
    def observation_space(self) -> gym.Space:
        return self.env.observation_space

    def get_observations(self, **kwargs: Any) -> Any:
        return self._observation

    def _step(self, action: Any) -> RLStepResult:
        observation, reward, terminated, truncated, info = self.env.step(action)
        self._observation = observation
        return RLStepResult(observation, float(reward), terminated or truncated, info, terminated, truncated)

    def render(self, mode: str = "rgb_array", *args: Any, **kwargs: Any) -> Any:
        """The environment's frame; gymnasium fixes the mode when the env is made.

        Raises
        ------
        ValueError
            When ``mode`` is not the environment's ``render_mode``.
        """
        if mode != self.env.render_mode:
            raise ValueError(
                f"mode must be the env's render_mode {self.env.render_mode!r} (set it with "
                f"GymTaskSampler(..., render_mode=...)), got {mode!r}"
            )
        return self.env.render()


class GymTaskSampler(TaskSampler):
    """A gymnasium environment as a task sampler: each task is one episode.

    Parameters
    ----------
    env : str or callable
        A registered environment id for ``gymnasium.make`` or a zero-argument factory
        returning a ``gymnasium.Env``.
    seed : int, optional
        Seed of the first episode's reset (later resets continue the env's RNG).
    max_tasks : int, optional
        Number of episodes before ``next_task`` returns None; None for endless.
    max_steps : int, optional
        Step limit of each task (on top of the env's own ``TimeLimit``).
    **make_kwargs
        Passed to ``gymnasium.make`` (only with an id), e.g. ``render_mode="rgb_array"``.

    Examples
    --------
    >>> from kernelgym.collectors import VectorSampledTasks, GymTaskSampler
    >>> tasks = VectorSampledTasks(GymTaskSampler, [{"env": "CartPole-v1", "seed": s} for s in range(4)])
    """

    def __init__(
        self,
        env: str | Callable[[], gym.Env],
        seed: int | None = None,
        max_tasks: int | None = None,
        max_steps: int | None = None,
        **make_kwargs: Any,
    ):
        if isinstance(env, str):
            self._env = gym.make(env, **make_kwargs)
        elif callable(env):
            if make_kwargs:
                raise TypeError(f"make_kwargs only apply to an env id, got a factory and {sorted(make_kwargs)}")
            self._env = env()
            if not isinstance(self._env, gym.Env):
                raise TypeError(f"env factory must return a gymnasium.Env, got {type(self._env).__name__}")
        else:
            raise TypeError(f"env must be a gymnasium id (str) or a factory, got {type(env).__name__}")
        if max_tasks is not None and (not isinstance(max_tasks, int) or max_tasks < 0):
            raise ValueError(f"max_tasks must be a non-negative int or None, got {max_tasks!r}")
        self.max_tasks = max_tasks
        self.max_steps = max_steps
        self._pending_seed = seed
        self._num_sampled = 0
        self._last_task: GymTask | None = None

    @property
    def env(self) -> gym.Env:
        """The environment every task of this sampler runs in."""
        return self._env

    @property
    def length(self) -> int | float:
        return float("inf") if self.max_tasks is None else self.max_tasks - self._num_sampled

    @property
    def last_sampled_task(self) -> GymTask | None:
        return self._last_task

    def next_task(self, **kwargs: Any) -> GymTask | None:
        """Reset the environment and return its episode; None once ``max_tasks`` were given.

        ``kwargs`` may hold ``options`` for ``env.reset``.
        """
        if self.length <= 0:
            return None
        observation, info = self._env.reset(seed=self._pending_seed, options=kwargs.get("options"))
        self._pending_seed = None
        self._num_sampled += 1
        self._last_task = GymTask(self._env, observation, info, self.max_steps)
        return self._last_task

    def set_seed(self, seed: int) -> None:
        """The next task's reset uses ``seed`` (gymnasium seeds the env once, then continues)."""
        self._pending_seed = int(seed)

    def reset(self) -> None:
        self._num_sampled = 0
        self._last_task = None

    def close(self) -> None:
        self._env.close()
