"""kernelgym envs as gymnasium 1.x ``VectorEnv`` objects (numpy in, numpy out).

Every registered id is also registered with gymnasium as ``"kernelgym/<id>"`` (see
`kernelgym.envs.gymnasium_registration`), with a vector entry point only::

    import gymnasium, kernelgym.envs

    envs = gymnasium.make_vec("kernelgym/CartPole-v1", num_envs=1024,
                              vectorization_mode="vector_entry_point")
"""

from __future__ import annotations

import gymnasium
import numpy as np

from kernelgym.envs import registry
# the registration lives in its own module (it never imports this one); re-exported here
from kernelgym.envs.gymnasium_registration import GYMNASIUM_NAMESPACE, register_gymnasium_envs

__all__ = ["GYMNASIUM_NAMESPACE", "KernelGymnasiumVectorEnv", "register_gymnasium_envs"]


class KernelGymnasiumVectorEnv(gymnasium.vector.VectorEnv):
    """A `KernelVectorEnv` behind gymnasium's ``VectorEnv`` interface.

    Observations, rewards and flags are returned as numpy arrays that the caller owns
    (copies of the kernel buffers), as gymnasium's own vector envs do. Autoreset follows
    the wrapped env's ``autoreset_mode`` and is announced in ``metadata``.

    Parameters
    ----------
    env_id : str
    num_envs : int
    backend : str or None
        As in `kernelgym.envs.make` (default "auto").
    seed : int or None
    render_mode : {"rgb_array"} or None
    **kwargs
        Passed to `kernelgym.envs.make` (``autoreset_mode``, ``max_episode_steps``, params).
    """

    def __init__(self, env_id: str, num_envs: int = 1, backend: str | None = "auto", seed=None,
                 render_mode: str | None = None, **kwargs):
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode: expected None or 'rgb_array', got {render_mode!r}")
        self.env = registry.make(env_id, num_envs, backend=backend, seed=seed, **kwargs)
        self.num_envs = self.env.num_envs
        self.single_observation_space = self.env.single_observation_space
        self.single_action_space = self.env.single_action_space
        self.observation_space = self.env.observation_space
        self.action_space = self.env.action_space
        self.render_mode = render_mode
        self.metadata = {
            "autoreset_mode": self.env.autoreset_mode,
            "render_modes": ["rgb_array"],
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Reset every env; ``seed`` re-seeds the per-env streams."""
        super().reset(seed=seed)  # seeds the action space's sampler like gymnasium's own envs
        obs, _ = self.env.reset(seed=seed, options=options, numpy=True)
        return np.array(obs), {}

    def step(self, actions):
        """Step every env with a numpy (or array-like) batch of actions."""
        if not isinstance(actions, np.ndarray):
            actions = np.asarray(actions)
        obs, rewards, terminated, truncated, info = self.env.step(actions, numpy=True)
        info = {key: np.array(value) for key, value in info.items()}
        return np.array(obs), np.array(rewards), np.array(terminated), np.array(truncated), info

    def render(self):
        """A tuple of RGB frames, one per env, when ``render_mode="rgb_array"``."""
        if self.render_mode is None:
            raise ValueError("render: this env was made with render_mode=None; pass render_mode='rgb_array'")
        return tuple(self.env.render(index) for index in range(self.num_envs))

    def close_extras(self, **kwargs):
        self.env.close()
