"""One kernelgym env as a plain ``gymnasium.Env`` (numpy in, numpy out).

This is what ``gymnasium.make("kernelgym/<id>")`` builds, so gymnasium's
``check_env``, ``make_vec(..., vectorization_mode="sync" | "async")`` and libraries
that create envs by id (TorchRL's ``GymEnv``, SB3's ``make_vec_env``) work::

    import gymnasium, kernelgym.envs

    env = gymnasium.make("kernelgym/CartPole-v1")
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())

Under it runs a `KernelVectorEnv` with ``num_envs=1`` on the cpu backend. For speed,
use many envs in one `KernelVectorEnv` (`kernelgym.envs.make`) or the vector entry
point (``make_vec(..., vectorization_mode="vector_entry_point")``) instead.

``make_vec(..., vectorization_mode="async")`` forks its workers on Linux, also after
the parent ran kernelgym envs on cpu: numba's GNU OpenMP threads kill a forked child
that enters a parallel region, and a one-env launch never does (it runs in the calling
thread, `kernelgym.core.binding.PARALLEL_FROM`).
"""

from __future__ import annotations

import dataclasses

import gymnasium
import numpy as np

from kernelgym.envs import registry
from kernelgym.envs.observations import map_tree
from kernelgym.envs.runtime.actions import one_action

__all__ = ["KernelGymnasiumEnv"]

# Episode steps are counted in int32 by the runtime; this many is "no limit of its own".
_NO_TIME_LIMIT = int(np.iinfo(np.int32).max) - 1


class KernelGymnasiumEnv(gymnasium.Env):
    """A single copy of a single-agent kernelgym env behind ``gymnasium.Env``.

    Like gymnasium's own classic-control envs, it keeps no time limit unless given
    one: ``gymnasium.make`` adds a ``TimeLimit`` wrapper with the id's registered
    ``max_episode_steps``. Observations are copies the caller owns.

    Parameters
    ----------
    env_id : str
    backend : str or None
        As in `kernelgym.envs.make` (default "cpu": one env gains nothing from a GPU).
    seed : int or None
        Seeds the env's RNG stream at creation; ``reset(seed=...)`` re-seeds it.
    render_mode : {"rgb_array"} or None
        ``"rgb_array"`` only for envs whose spec has a renderer.
    max_episode_steps : int or None
        A time limit kept by the env itself (None: none; gymnasium's wrapper keeps it).
    precision : {"float64", "float32"} or None
        As in `kernelgym.envs.make` (None: the env's default).
    fast_math : bool
        As in `kernelgym.envs.make`: FMA contraction on (default False).
    **kwargs
        Overrides of the env's params fields, and ``randomize`` (per-env fields drawn at
        each reset, as in `kernelgym.envs.make`).

    Raises
    ------
    TypeError
        An unknown keyword argument, or ``env_id`` is a multi-agent env (use the
        PettingZoo adapter or a vector env).
    """

    # gymnasium.make reads the class's metadata before it creates the env: declare the mode
    # this adapter renders, so that render_mode="rgb_array" passes without a warning. Each
    # instance narrows it to its env's (an env without a renderer refuses the mode).
    metadata = {"render_modes": ["rgb_array"], "render_fps": None}

    def __init__(
        self,
        env_id: str,
        backend: str | None = "cpu",
        seed=None,
        render_mode: str | None = None,
        max_episode_steps: int | None = None,
        precision: str | None = None,
        fast_math: bool = False,
        **kwargs,
    ):
        spec = registry.get_spec(env_id)
        param_names = [field.name for field in dataclasses.fields(spec.params)] if spec.params is not None else []
        unexpected = sorted(set(kwargs) - set(param_names) - {"randomize"})
        if unexpected:
            # Python's own wording: clients such as TorchRL's GymEnv try optional arguments and match on it
            raise TypeError(
                f"{type(self).__name__}.__init__() got an unexpected keyword argument {unexpected[0]!r} "
                f"(the params of {spec.id} are {param_names})"
            )
        render_modes = ["rgb_array"] if spec.render is not None else []
        if render_mode is not None and render_mode not in render_modes:
            raise ValueError(f"render_mode: expected None or one of {render_modes} for {spec.id}, got {render_mode!r}")
        self.env = registry.make(
            env_id,
            1,
            backend=backend,
            seed=seed,
            autoreset_mode="next_step",
            max_episode_steps=_NO_TIME_LIMIT if max_episode_steps is None else max_episode_steps,
            precision=precision,
            fast_math=fast_math,
            **kwargs,
        )
        if self.env.multi_agent:
            self.env.close()
            raise TypeError(
                f"env_id: {spec.id} is a multi-agent env ({self.env.num_agents} agents) and has no single-agent "
                "gymnasium.Env form; use kernelgym.envs.pettingzoo_adapter.KernelParallelEnv, or "
                f"gymnasium.make_vec('kernelgym/{spec.id}', vectorization_mode='vector_entry_point')"
            )
        self.metadata = {"render_modes": render_modes, "render_fps": spec.render_fps}
        self.render_mode = render_mode
        self.observation_space = self.env.single_observation_space
        self.action_space = self.env.single_action_space
        self._actions = np.zeros(self.env.action_space.shape, dtype=self.env.action_space.dtype)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Start a new episode; ``seed`` re-seeds the env's stream (None: continue it).

        kernelgym envs take no reset options: ``options`` must be None or empty.
        """
        super().reset(seed=seed)
        obs, _ = self.env.reset(seed=seed, options=options or None, numpy=True)
        return map_tree(_first, obs), {}

    def step(self, action):
        """One step with one action (an int for discrete spaces, an array for Box).

        Raises
        ------
        TypeError, ValueError
            An action gymnasium's own envs refuse (a float for ``Discrete``, a wrong
            shape, a value out of range, non-finite or overflowing the action dtype),
            before anything runs (`kernelgym.envs.runtime.actions.one_action`).
        """
        self._actions[0] = one_action(self.action_space, action, "action")
        obs, rewards, terminated, truncated, _ = self.env.step(self._actions, numpy=True)
        return map_tree(_first, obs), float(rewards[0]), bool(terminated[0]), bool(truncated[0]), {}

    def render(self):
        """An RGB ``(H, W, 3)`` uint8 frame when ``render_mode="rgb_array"``."""
        if self.render_mode is None:
            raise ValueError("render: this env was made with render_mode=None; pass render_mode='rgb_array'")
        return self.env.render(0)

    def close(self):
        self.env.close()


def _first(batch) -> np.ndarray:
    """The one env's observation (a copy the caller owns) from a batch of one."""
    return np.array(batch[0])
