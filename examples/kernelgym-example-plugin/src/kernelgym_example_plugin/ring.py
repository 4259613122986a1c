"""Ring-v0: a multi-agent template. Agents on a ring agree on a value despite noise.

``num_agents`` agents sit on a ring; each holds a value in ``[-1, 1]``, starting uniform.
Each step every agent nudges its value down, not at all, or up by ``nudge`` (action 0, 1,
2), plus noise uniform in ``[-noise, noise)`` drawn from ITS OWN random stream, and is
rewarded ``-|value - mean of its two neighbours|`` after the move. An agent observes its
own value and its left and right neighbours'. Episodes end at the time limit.

What makes it the template of an agent-layout env (``kernel_layout="agent"``):

- a kernel body is ``body(env, agent, num_agents, <names>)``, one GPU thread per agent;
- per-agent state arrays (``per_agent=True``) are ``(num_envs, num_agents)``;
- agent ``agent`` of env ``env`` draws only from ``rng.agent_stream(env, agent, num_agents)``
  (an env's agents run concurrently on a GPU: a shared stream would race);
- an agent that reads what another agent writes needs a launch boundary in between: the
  step runs as phases (a tuple of kernels), ``move`` (write ``next_value`` from the current
  values) then ``settle`` (commit) then ``observe`` (read the neighbours' new values);
- a reset writes no reward (``first_observation``): with same_step autoreset it runs in the
  step that ended the episode, whose rewards are kept;
- the reference steps one env with every agent's stream, ``rng_states`` of shape
  ``(num_agents, 2)``, row ``a`` for agent ``a``, and returns one reward per agent.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from gymnasium import spaces

from kernelgym.core import agent_kernel, device_function, rng
from kernelgym.envs import CPUReference, EnvSpec, StateArray, hookimpl


@dataclasses.dataclass(frozen=True)
class RingParams:
    num_agents: int = 5
    nudge: float = 0.1
    noise: float = 0.02

    def __post_init__(self):
        if self.num_agents < 3 or self.nudge <= 0.0 or self.noise < 0.0:
            raise ValueError(f"RingParams: expected num_agents >= 3, nudge > 0, noise >= 0; got {self}")


@device_function
def moved(value, action, draw, nudge, noise):
    """A value after its agent's action and noise (``draw`` uniform in [0, 1)), kept in [-1, 1]."""
    return min(max(value + (action - 1) * nudge + (2.0 * draw - 1.0) * noise, -1.0), 1.0)


@agent_kernel
def move(env, agent, num_agents, actions, rng_states, value, next_value, nudge, noise):
    draw = rng.uniform(rng_states, rng.agent_stream(env, agent, num_agents))
    next_value[env, agent] = moved(value[env, agent], actions[env, agent], draw, nudge, noise)


@agent_kernel
def settle(env, agent, num_agents, value, next_value):
    value[env, agent] = next_value[env, agent]


@agent_kernel
def observe(env, agent, num_agents, obs, rewards, value):
    left, right = value[env, (agent - 1) % num_agents], value[env, (agent + 1) % num_agents]
    obs[env, agent, 0], obs[env, agent, 1], obs[env, agent, 2] = value[env, agent], left, right
    rewards[env, agent] = -abs(value[env, agent] - 0.5 * (left + right))


@agent_kernel
def first_observation(env, agent, num_agents, obs, value):
    # a reset writes no reward: in same_step autoreset it follows the episode's last step
    left, right = value[env, (agent - 1) % num_agents], value[env, (agent + 1) % num_agents]
    obs[env, agent, 0], obs[env, agent, 1], obs[env, agent, 2] = value[env, agent], left, right


@agent_kernel
def place(env, agent, num_agents, rng_states, value):
    value[env, agent] = rng.uniform_range(rng_states, rng.agent_stream(env, agent, num_agents), -1.0, 1.0)


# The reference: one env, every agent in turn; each phase completes before the next reads it.
def _reference_reset(params, rng_states):
    return {
        "value": np.array([rng.uniform_range(rng_states, a, -1.0, 1.0) for a in range(params.num_agents)]),
        "next_value": np.zeros(params.num_agents),
    }


def _reference_step(params, state, action, rng_states):
    value = np.array(
        [
            moved(state["value"][a], int(action[a]), rng.uniform(rng_states, a), params.nudge, params.noise)
            for a in range(params.num_agents)
        ]
    )
    left, right = _neighbours(value)
    rewards = -np.abs(value - 0.5 * (left + right))
    return {"value": value, "next_value": value.copy()}, rewards.astype(np.float32), False


def _reference_observe(params, state):
    value = state["value"]
    return np.stack([value, *_neighbours(value)], axis=1).astype(np.float32)


def _neighbours(value):
    """Each agent's left and right neighbour on the ring (the kernels' ``(agent -/+ 1) % num_agents``;
    indexing, as `np.roll` takes ten times as long on a few agents, and the kit replays this often)."""
    agents = np.arange(len(value))
    return value[agents - 1], value[(agents + 1) % len(value)]


SPEC = EnvSpec(
    id="Ring-v0",
    observation_space=spaces.Box(-1.0, 1.0, (3,), np.float32),
    action_space=spaces.Discrete(3),
    state=(
        # every move keeps a value in [-1, 1] (`moved`)
        StateArray("value", np.float64, per_agent=True, low=-1.0, high=1.0),
        StateArray("next_value", np.float64, per_agent=True, restore_on_reset=True, low=-1.0, high=1.0),
    ),
    step_kernel=(move, settle, observe),
    reset_kernel=(place, first_observation),
    kernel_layout="agent",
    num_agents=lambda params: params.num_agents,
    params=RingParams(),
    max_episode_steps=50,
    reference=CPUReference(_reference_reset, _reference_step, _reference_observe),
    description="Agents on a ring agree on a value despite noise (multi-agent example plugin).",
    state_strategy=f"{__name__}:state_strategy",
    invariants=f"{__name__}:invariants",
)


@hookimpl
def kernelgym_register_envs():
    return [SPEC]


# Optional, for the property-test kit: states to start from, and rules that always hold.
def state_strategy(params):
    from hypothesis import strategies as st

    values = st.lists(st.floats(-1.0, 1.0), min_size=params.num_agents, max_size=params.num_agents)
    return values.map(lambda v: {"value": np.array(v), "next_value": np.zeros(params.num_agents)})


def invariants(params, state):
    assert np.all(np.abs(state["value"]) <= 1.0), f"a value left [-1, 1]: {state['value']}"
