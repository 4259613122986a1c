"""AgentDictWalk: `agent_walk`'s multi-agent walk with a Dict observation per agent.

Each agent observes ``{"arrived": Discrete(100), "position": Box(1,) float32}``: the env's
arrival count and its own position divided by ``goal``. Its agent-layout kernels write the
leaves ``obs_arrived`` and ``obs_position``, ``(num_envs, num_agents, ...)`` each; moves,
streams and the reference's dynamics are `agent_walk`'s.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
from gymnasium import spaces

from kernelgym.core import agent_kernel
from kernelgym.envs import hookimpl
from kernelgym.envs.spec import CPUReference

from . import agent_walk

OBSERVATION_SPACE = spaces.Dict(
    {"arrived": spaces.Discrete(100), "position": spaces.Box(-np.inf, 1.0, (1,), np.float32)}
)


@agent_kernel
def finish(env, agent, num_agents, obs_arrived, obs_position, terminated, position, arrived, goal):
    obs_position[env, agent, 0] = position[env, agent] / goal
    obs_arrived[env, agent] = arrived[env]
    if agent == 0:
        terminated[env] = arrived[env] == num_agents


@agent_kernel
def observe(env, agent, num_agents, obs_arrived, obs_position, position, arrived, goal):
    obs_position[env, agent, 0] = position[env, agent] / goal
    obs_arrived[env, agent] = arrived[env]


def reference_observe(params, state):
    position = (np.asarray(state["position"]) / params.goal).astype(np.float32).reshape(params.num_agents, 1)
    return {"arrived": np.full(params.num_agents, int(state["arrived"]), np.int64), "position": position}


SPEC = dataclasses.replace(
    agent_walk.SPEC,
    id="AgentDictWalk-v0",
    observation_space=OBSERVATION_SPACE,
    step_kernel=(agent_walk.move, finish),
    reset_kernel=(agent_walk.place, observe),
    reference=CPUReference(
        agent_walk.reference_reset,
        functools.partial(agent_walk.reference_step, shared_stream=False, last_writer_ends=False),
        reference_observe,
    ),
)


@hookimpl
def kernelgym_register_envs():
    return [SPEC]
