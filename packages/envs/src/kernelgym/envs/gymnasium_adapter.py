"""kernelgym envs as gymnasium 1.x ``VectorEnv`` objects (numpy in, numpy out).

Every registered id is also registered with gymnasium as ``"kernelgym/<id>"`` (see
`kernelgym.envs.gymnasium_registration`): a vector entry point (this module's
`KernelGymnasiumVectorEnv`), a single-env entry point
(`kernelgym.envs.gymnasium_env.KernelGymnasiumEnv`) and the env's time limit::

    import gymnasium, kernelgym.envs

    envs = gymnasium.make_vec("kernelgym/CartPole-v1", num_envs=1024,
                              vectorization_mode="vector_entry_point")
    env = gymnasium.make("kernelgym/CartPole-v1")
"""

from __future__ import annotations

import copy

import gymnasium
import numpy as np
from gymnasium.vector.utils import batch_space

from kernelgym.envs import registry

# the registration lives in its own module (it never imports this one); re-exported here
from kernelgym.envs.gymnasium_registration import GYMNASIUM_NAMESPACE, register_gymnasium_envs
from kernelgym.envs.observations import map_tree

__all__ = ["GYMNASIUM_NAMESPACE", "KernelGymnasiumVectorEnv", "register_gymnasium_envs"]

_FINAL_OBS_KEYS = ("final_obs", "_final_obs")
# what the kernels were built for: setting one after construction would change nothing
_FIXED = frozenset({"num_envs", "autoreset_mode"})


class KernelGymnasiumVectorEnv(gymnasium.vector.VectorEnv):
    """A `KernelVectorEnv` behind gymnasium's ``VectorEnv`` interface.

    Observations, rewards, flags and ``info`` are returned as numpy arrays that the
    caller owns (copies of the kernel buffers), as gymnasium's own vector envs do.
    Autoreset is ``same_step`` unless ``autoreset_mode`` says otherwise: the mode that
    the libraries which consume a vector env expect (TorchRL refuses ``next_step``;
    skrl's and SB3's loops treat every step as a transition). It is announced in
    ``metadata``, which gymnasium's vector wrappers read, and as an attribute, which
    TorchRL reads. A ``Dict``/``Tuple`` observation (and ``final_obs``) is a dict/tuple of
    batched arrays, as ``observation_space`` (gymnasium's ``batch_space``) says. Like gymnasium's own vector envs,
    ``info`` holds only ``final_obs``/``_final_obs`` (same_step mode); wrap it in
    ``gymnasium.wrappers.vector.RecordEpisodeStatistics`` for episode returns (TorchRL's
    info reader cannot stack the nested ``info["episode"]`` dict).

    A multi-agent env's ``single_observation_space`` and ``single_action_space`` are one
    env's joint ones, ``(num_agents, ...)`` (the per-agent spaces batched over its agents),
    its rewards ``(num_envs, num_agents)``: ``observation_space`` is then gymnasium's
    ``batch_space(single_observation_space, num_envs)``, as for any vector env.

    Parameters
    ----------
    env_id : str
    num_envs : int
    backend : str or None
        As in `kernelgym.envs.make` (default "auto").
    seed : int or None
    render_mode : {"rgb_array"} or None
        ``"rgb_array"`` only for envs whose spec has a renderer.
    autoreset_mode : {"same_step", "next_step"} or gymnasium.vector.AutoresetMode
        Default ``"same_step"`` (`kernelgym.envs.make`'s default is ``"next_step"``).
    **kwargs
        Passed to `kernelgym.envs.make` (``max_episode_steps``, ``precision``, ``fast_math``, params).
    """

    # as KernelGymnasiumEnv.metadata: the class declares the mode, each instance its env's
    metadata = {"render_modes": ["rgb_array"], "render_fps": None}

    def __init__(
        self,
        env_id: str,
        num_envs: int = 1,
        backend: str | None = "auto",
        seed=None,
        render_mode: str | None = None,
        autoreset_mode="same_step",
        **kwargs,
    ):
        spec = registry.get_spec(env_id)
        render_modes = ["rgb_array"] if spec.render is not None else []
        if render_mode is not None and render_mode not in render_modes:
            raise ValueError(f"render_mode: expected None or one of {render_modes} for {spec.id}, got {render_mode!r}")
        self.env = registry.make(env_id, num_envs, backend=backend, seed=seed, autoreset_mode=autoreset_mode, **kwargs)
        self.num_envs = self.env.num_envs
        # one env's observation and action: for a multi-agent env, its agents' (A, ...) joint ones,
        # so that batching them over num_envs gives the spaces of what step returns and takes
        agents = self.env.num_agents if self.env.multi_agent else None
        self.single_observation_space = _joint(self.env.single_observation_space, agents)
        self.single_action_space = _joint(self.env.single_action_space, agents)
        self.observation_space = self.env.observation_space
        self.action_space = self.env.action_space
        self.render_mode = render_mode
        self.autoreset_mode = self.env.autoreset_mode
        self.metadata = {
            "autoreset_mode": self.env.autoreset_mode,
            "render_modes": render_modes,
            "render_fps": spec.render_fps,
        }

    def __setattr__(self, name, value):
        """``num_envs`` and ``autoreset_mode`` are fixed once set; ``render_mode`` takes the env's modes only."""
        if name in _FIXED and name in self.__dict__:
            raise AttributeError(
                f"{name}: fixed when the vector env is made (its kernels are built for it); make a new one to change it"
            )
        if (
            name == "render_mode"
            and "metadata" in self.__dict__
            and value is not None
            and value not in self.metadata["render_modes"]
        ):
            raise ValueError(f"render_mode: expected None or one of {self.metadata['render_modes']}, got {value!r}")
        super().__setattr__(name, value)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Reset every env; ``seed`` re-seeds the per-env streams."""
        super().reset(seed=seed)  # seeds the action space's sampler like gymnasium's own envs
        obs, _ = self.env.reset(seed=seed, options=options or None, numpy=True)
        return map_tree(np.array, obs), {}

    def step(self, actions):
        """Step every env with a numpy (or array-like) batch of actions."""
        if not isinstance(actions, np.ndarray):
            actions = np.asarray(actions)
        obs, rewards, terminated, truncated, info = self.env.step(actions, numpy=True)
        return (
            map_tree(np.array, obs),
            np.array(rewards),
            np.array(terminated),
            np.array(truncated),
            {key: map_tree(np.array, info[key]) for key in _FINAL_OBS_KEYS if key in info},
        )

    def render(self):
        """A tuple of RGB frames, one per env, when ``render_mode="rgb_array"``."""
        if self.render_mode is None:
            raise ValueError("render: this env was made with render_mode=None; pass render_mode='rgb_array'")
        return tuple(self.env.render(index) for index in range(self.num_envs))

    def close_extras(self, **kwargs):
        self.env.close()


def _joint(space, agents: int | None):
    """``space`` batched over an env's agents (a copy of ``space`` for a single-agent env)."""
    return copy.deepcopy(space) if agents is None else batch_space(space, agents)
