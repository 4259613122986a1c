"""A multi-agent kernelgym env as a PettingZoo ``ParallelEnv`` (one env, dicts per agent).

Needs the optional extra ``kernelgym-envs[pettingzoo]``::

    from kernelgym.envs.pettingzoo_adapter import KernelParallelEnv

    env = KernelParallelEnv("TagGridWorld-v0", seed=0)
    observations, infos = env.reset()
    while env.agents:
        actions = {agent: env.action_space(agent).sample() for agent in env.agents}
        observations, rewards, terminations, truncations, infos = env.step(actions)

Agents are named ``"agent_0"`` ... ``"agent_{A-1}"`` in the env's agent order. The whole
env ends at once (every agent terminated or truncated together); then ``agents`` is
empty until the next ``reset``.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

try:
    from pettingzoo import ParallelEnv
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "kernelgym.envs.pettingzoo_adapter needs PettingZoo: pip install 'kernelgym-envs[pettingzoo]'"
    ) from error

from kernelgym.envs import registry
from kernelgym.envs.observations import map_tree
from kernelgym.envs.runtime.actions import one_action

__all__ = ["KernelParallelEnv"]


class KernelParallelEnv(ParallelEnv):
    """One copy of a kernelgym env behind PettingZoo's parallel API.

    Parameters
    ----------
    env_id : str
    backend : str or None
        As in `kernelgym.envs.make` (default "cpu": one env gains nothing from a GPU).
    seed : int or None
    render_mode : {"rgb_array"} or None
    **kwargs
        Passed to `kernelgym.envs.make` (``max_episode_steps``, params).
    """

    metadata: dict[str, Any] = {"is_parallelizable": True}

    def __init__(self, env_id: str, backend: str | None = "cpu", seed=None, render_mode: str | None = None, **kwargs):
        spec = registry.get_spec(env_id)
        render_modes = ["rgb_array"] if spec.render is not None else []
        if render_mode is not None and render_mode not in render_modes:
            raise ValueError(f"render_mode: expected None or one of {render_modes} for {spec.id}, got {render_mode!r}")
        self.env = registry.make(env_id, 1, backend=backend, seed=seed, autoreset_mode="next_step", **kwargs)
        self.metadata = dict(self.metadata, name=spec.id, render_modes=render_modes, render_fps=spec.render_fps)
        self.render_mode = render_mode
        self.possible_agents = [f"agent_{index}" for index in range(self.env.num_agents)]
        self.agents: list[str] = []
        # one space object per agent: seeding one agent's sampler leaves the others alone
        self._observation_spaces = {
            agent: copy.deepcopy(self.env.single_observation_space) for agent in self.possible_agents
        }
        self._action_spaces = {agent: copy.deepcopy(self.env.single_action_space) for agent in self.possible_agents}
        self._action_buffer = np.zeros(self.env.action_space.shape, dtype=self.env.action_space.dtype)
        self._action_rows = self._action_buffer.reshape(self.env.num_agents, -1)  # a view: one row per agent
        self._multi_agent = self.env.multi_agent

    def observation_space(self, agent):
        """The agent's own observation space (every agent's is equal to the others')."""
        self._check_agent_name(agent)
        return self._observation_spaces[agent]

    def action_space(self, agent):
        """The agent's own action space (every agent's is equal to the others')."""
        self._check_agent_name(agent)
        return self._action_spaces[agent]

    def reset(self, seed: int | None = None, options: dict | None = None):
        """Start a new episode; ``seed`` re-seeds the env. kernelgym envs take no reset
        options: ``options`` is accepted for the PettingZoo API and not used."""
        obs, _ = self.env.reset(seed=seed, numpy=True)
        if seed is not None:
            # agent k's sampler gets seed + k: action_space(agent).sample() is reproducible per instance
            for index, agent in enumerate(self.possible_agents):
                self._action_spaces[agent].seed(seed + index)
        self.agents = list(self.possible_agents)
        return self._per_agent(obs), {agent: {} for agent in self.agents}

    def step(self, actions: dict):
        if not self.agents:
            raise RuntimeError("step: the episode is over (no agents left); call reset() first")
        if not isinstance(actions, dict):
            raise TypeError(f"actions: expected a dict agent -> action, got {type(actions).__name__}")
        missing = [agent for agent in self.agents if agent not in actions]
        unknown = [agent for agent in actions if agent not in self.agents]
        if missing or unknown:
            raise KeyError(f"actions: expected one action per live agent; missing {missing}, unknown {unknown}")
        # every agent's action checked (as gymnasium's spaces check) before any is written
        checked = [
            one_action(self._action_spaces[agent], actions[agent], f"actions[{agent!r}]")
            for agent in self.possible_agents
        ]
        for index, action in enumerate(checked):
            self._action_rows[index] = np.reshape(action, -1)
        obs, rewards, terminated, truncated, _ = self.env.step(self._action_buffer, numpy=True)
        agents = self.agents
        observations = self._per_agent(obs)
        reward_row = rewards[0] if self._multi_agent else rewards[:1]
        rewards_out = {agent: float(reward_row[index]) for index, agent in enumerate(agents)}
        terminations = {agent: bool(terminated[0]) for agent in agents}
        truncations = {agent: bool(truncated[0]) for agent in agents}
        infos: dict[str, dict] = {agent: {} for agent in agents}
        if terminated[0] or truncated[0]:
            self.agents = []
        return observations, rewards_out, terminations, truncations, infos

    def render(self):
        if self.render_mode is None:
            raise ValueError("render: this env was made with render_mode=None; pass render_mode='rgb_array'")
        return self.env.render(0)

    def close(self):
        self.env.close()

    def _per_agent(self, obs) -> dict:
        """Each agent's copy of the one env's observation (a dict/tuple of arrays for a Dict/Tuple space)."""
        if self._multi_agent:
            return {
                agent: map_tree(lambda batch, index=index: np.array(batch[0, index]), obs)
                for index, agent in enumerate(self.possible_agents)
            }
        return {self.possible_agents[0]: map_tree(lambda batch: np.array(batch[0]), obs)}

    def _check_agent_name(self, agent):
        if agent not in self.possible_agents:
            raise KeyError(f"agent: expected one of {self.possible_agents}, got {agent!r}")
