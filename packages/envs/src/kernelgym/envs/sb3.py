"""A kernelgym env as a Stable-Baselines3 ``VecEnv`` (numpy in, numpy out).

Needs the optional extra ``kernelgym-envs[sb3]``::

    from stable_baselines3 import PPO
    from kernelgym.envs.sb3 import KernelSB3VecEnv

    venv = KernelSB3VecEnv("CartPole-v1", num_envs=8, seed=0)
    PPO("MlpPolicy", venv).learn(100_000)

All ``num_envs`` copies run in one `KernelVectorEnv` in ``same_step`` autoreset mode,
which is what SB3 expects: an env whose episode ends is reset in the same step, its
last observation is in ``infos[i]["terminal_observation"]``, a time-limit end is
marked by ``infos[i]["TimeLimit.truncated"]``, and ``infos[i]["episode"]`` holds the
episode's return ``"r"``, length ``"l"`` and the seconds since the VecEnv was made
``"t"`` (what SB3's ``Monitor`` reports, so ``ep_rew_mean`` is logged without one).
A ``Dict`` observation is a dict of batched arrays, as SB3's ``MultiInputPolicy`` takes.
"""

from __future__ import annotations

import time

import numpy as np

try:
    from stable_baselines3.common.vec_env.base_vec_env import VecEnv
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise ImportError("kernelgym.envs.sb3 needs Stable-Baselines3: pip install 'kernelgym-envs[sb3]'") from error

from kernelgym.envs import registry
from kernelgym.envs.observations import map_tree

__all__ = ["KernelSB3VecEnv"]


class KernelSB3VecEnv(VecEnv):
    """``num_envs`` copies of a single-agent kernelgym env behind SB3's ``VecEnv``.

    Parameters
    ----------
    env_id : str
    num_envs : int
    backend : str or None
        As in `kernelgym.envs.make` (default "auto"). SB3 works on numpy arrays, so
        every step copies the outputs to the host.
    seed : int or None
        Seeds the per-env streams; SB3's ``seed()`` re-seeds them at the next reset.
    render_mode : {"rgb_array"} or None
    agents_as_envs : bool
        For a multi-agent env: SB3 sees every agent of every env as one env (``num_envs *
        num_agents`` of them, env ``e``'s agent ``a`` at index ``e * num_agents + a``), so one
        shared policy learns from all of them (parameter sharing). An env's episode ends for
        all its agents at once; each agent reports its own return. False (default): a
        multi-agent env is refused.
    **kwargs
        Passed to `kernelgym.envs.make` (``max_episode_steps``, params).
    """

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        backend: str | None = "auto",
        seed=None,
        render_mode: str | None = None,
        agents_as_envs: bool = False,
        **kwargs,
    ):
        if "autoreset_mode" in kwargs:
            raise ValueError(
                "autoreset_mode: KernelSB3VecEnv always uses 'same_step' (SB3's convention); "
                f"got {kwargs['autoreset_mode']!r}"
            )
        if kwargs.get("episode_statistics", True) is not True:
            raise ValueError(
                "episode_statistics: KernelSB3VecEnv reports each episode to SB3's logger and needs "
                f"them; expected True, got {kwargs['episode_statistics']!r}"
            )
        spec = registry.get_spec(env_id)
        render_modes = ["rgb_array"] if spec.render is not None else []
        if render_mode is not None and render_mode not in render_modes:
            raise ValueError(f"render_mode: expected None or one of {render_modes} for {spec.id}, got {render_mode!r}")
        self.env = registry.make(env_id, num_envs, backend=backend, seed=seed, autoreset_mode="same_step", **kwargs)
        if not isinstance(agents_as_envs, bool):
            self.env.close()
            raise TypeError(f"agents_as_envs: expected True or False, got {agents_as_envs!r}")
        if self.env.multi_agent and not agents_as_envs:
            self.env.close()
            raise TypeError(
                f"env_id: {spec.id} is a multi-agent env ({self.env.num_agents} agents); SB3 trains "
                "single-agent envs: pass agents_as_envs=True to train one policy shared by every agent"
            )
        # SB3's envs are (env, agent) pairs: every batch is reshaped from (N, A, ...) to (N * A, ...)
        self._agents = self.env.num_agents if self.env.multi_agent else 1
        self._env_attributes = {"render_mode": render_mode}  # what SB3 reads per env through get_attr
        self._render_modes = render_modes
        self._actions: np.ndarray | None = None
        self._start_time = time.time()
        super().__init__(
            self.env.num_envs * self._agents, self.env.single_observation_space, self.env.single_action_space
        )

    def _flat(self, batch) -> np.ndarray:
        """A copy of an ``(N, ...)`` batch as SB3's ``(N * A, ...)`` (the agent axis folded in)."""
        batch = np.array(batch)
        return batch if not self.env.multi_agent else batch.reshape(self.num_envs, *batch.shape[2:])

    def reset(self):
        """Reset every env (with the seed given to ``seed()``, if any) and return the observations."""
        obs, _ = self.env.reset(seed=self._seeds[0], options=None, numpy=True)
        self._reset_seeds()
        self._reset_options()
        self.reset_infos = [{} for _ in range(self.num_envs)]
        return map_tree(self._flat, obs)

    def step_async(self, actions: np.ndarray) -> None:
        actions = np.asarray(actions)
        expected = (self.num_envs, *self.action_space.shape)
        native = (self.env.num_envs, self._agents, *self.action_space.shape)
        if self.env.multi_agent and actions.shape not in (expected, native):
            # checked here: the env would name its own (num_envs, num_agents, ...) shape, not this view's
            raise ValueError(
                f"actions: expected shape {expected} (one row per agent: agents_as_envs), got {actions.shape}"
            )
        if self.env.multi_agent and actions.ndim >= 1 and actions.shape[0] == self.num_envs:
            actions = actions.reshape(self.env.num_envs, self._agents, *actions.shape[1:])
        self._actions = actions

    def step_wait(self):
        obs, rewards, terminated, truncated, info = self.env.step(self._actions, numpy=True)
        dones = terminated | truncated
        infos = [{} for _ in range(self.num_envs)]
        elapsed = round(time.time() - self._start_time, 6)
        episode = info["episode"]
        for env_index in np.flatnonzero(dones):
            for agent in range(self._agents):
                index = env_index * self._agents + agent
                if self.env.multi_agent:
                    final = map_tree(lambda batch, e=env_index, a=agent: np.array(batch[e][a]), info["final_obs"])
                    episode_return = np.asarray(episode["r"][env_index]).reshape(-1)
                    episode_return = episode_return[agent] if episode_return.size > 1 else episode_return[0]
                else:
                    final = map_tree(lambda batch, e=env_index: np.array(batch[e]), info["final_obs"])
                    episode_return = episode["r"][env_index]
                infos[index] = {
                    "terminal_observation": final,
                    "TimeLimit.truncated": bool(truncated[env_index] and not terminated[env_index]),
                    "episode": {"r": float(episode_return), "l": int(episode["l"][env_index]), "t": elapsed},
                }
        # copies: SB3 keeps the last observation while it steps again
        return (
            map_tree(self._flat, obs),
            self._flat(rewards).reshape(self.num_envs),
            np.repeat(dones, self._agents),
            infos,
        )

    def close(self) -> None:
        self.env.close()

    def get_images(self):
        if self.render_mode != "rgb_array":
            raise ValueError("get_images: this VecEnv was made with render_mode=None; pass render_mode='rgb_array'")
        return [self.env.render(index // self._agents) for index in range(self.num_envs)]

    def get_attr(self, attr_name: str, indices=None) -> list:
        """An attribute of the underlying `KernelVectorEnv` (shared by every env), once per index."""
        value = self._env_attributes[attr_name] if attr_name in self._env_attributes else getattr(self.env, attr_name)
        return [value for _ in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value, indices=None) -> None:
        """Set an attribute of the underlying env; every env shares it, so ``indices`` must be all.

        A setting either takes effect or raises: ``max_episode_steps`` applies from the
        next step (`KernelVectorEnv.max_episode_steps`), ``render_mode`` takes the env's
        render modes; every other attribute of a `KernelVectorEnv` is fixed at its
        construction (``params``: per-env fields change through
        ``env_method("set_params", ...)``).

        Raises
        ------
        AttributeError
            An attribute that cannot be set (or does not exist), named.
        ValueError
            A bad value or ``indices``.
        """
        self._check_all(indices, "set_attr")
        if attr_name == "render_mode":
            if value is not None and value not in self._render_modes:
                raise ValueError(
                    f"set_attr('render_mode'): expected None or one of {self._render_modes}, got {value!r}"
                )
            self._env_attributes[attr_name] = self.render_mode = value
            return
        if not isinstance(attr_name, str) or attr_name.startswith("_") or not hasattr(self.env, attr_name):
            raise AttributeError(f"set_attr: {attr_name!r} is not a public attribute of {self.env!r}")
        setattr(self.env, attr_name, value)  # KernelVectorEnv applies it, or raises naming it

    def env_method(self, method_name: str, *method_args, indices=None, **method_kwargs) -> list:
        """Call a method of the underlying env once; ``indices`` must be all."""
        self._check_all(indices, "env_method")
        return [getattr(self.env, method_name)(*method_args, **method_kwargs)]

    def env_is_wrapped(self, wrapper_class, indices=None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]

    def _check_all(self, indices, method: str) -> None:
        if sorted(self._get_indices(indices)) != list(range(self.num_envs)):
            raise ValueError(
                f"{method} indices: the envs share one KernelVectorEnv; expected all of them (None), got {indices!r}"
            )
