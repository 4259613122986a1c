"""AgentWalk: a multi-agent 1-D walk with agent-layout kernels, correct, and copies with one race each.

Each of ``num_agents`` agents walks on the integers towards ``goal``: action 0 steps
left, 1 stays, 2 steps right, but with probability ``slip`` (drawn from the agent's own
RNG stream) it stays put. An agent that reaches ``goal`` is home: it stops, earns
``home_reward`` once, and the env's ``arrived`` counter goes up (``atomic_add``: several
agents may arrive in one step). Other steps cost ``step_cost``. The episode terminates
when every agent is home. Observation of an agent: ``(position / goal, arrived /
num_agents)``. Start: each agent draws a uniform position in ``[-start_range,
start_range]`` from its own stream.

The bug copies race on a GPU, where an env's agents run concurrently, yet pass the
in-order checks on the cpu: each has an exact reference that runs its agents in index
order, as the cpu twin does. Only the kit's ``agent_order`` check finds them:

- ``SHARED_STREAM``: every agent draws its slip from one stream of the env (its first
  agent's), so which draw an agent gets depends on the order the agents run in;
- ``SHARED_WRITE``: every agent writes the env's ``terminated`` flag (a shared per-env
  value) from its own position, without ``atomic_add``: the last writer wins;
- ``LOST_UPDATE``: agents arriving in one step count themselves with ``arrived[env] +=
  1`` instead of ``atomic_add`` (WarpDrive's race): the same total in every order on the
  cpu, one arrival lost on a GPU when two agents read the count before either writes.

``VIA_HELPER`` is correct too: it counts arrivals through a device function that calls
``atomic_add``. Every other kernel is self-contained (no shared helpers), so numba's
on-disk cache never serves a stale build of a helper.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
from gymnasium import spaces

from kernelgym.core import agent_kernel, atomic_add, device_function, rng
from kernelgym.envs.spec import CPUReference, EnvSpec, StateArray


@dataclasses.dataclass(frozen=True)
class AgentWalkParams:
    num_agents: int = 3
    goal: int = 3
    start_range: int = 2
    slip: float = 0.5
    home_reward: float = 1.0
    step_cost: float = 0.1


@agent_kernel
def move(env, agent, num_agents, actions, rng_states, rewards, position, arrived, goal, slip, home_reward, step_cost):
    if position[env, agent] >= goal:
        rewards[env, agent] = 0.0
        return
    slipped = rng.uniform(rng_states, rng.agent_stream(env, agent, num_agents)) < slip
    position[env, agent] += 0 if slipped else actions[env, agent] - 1
    if position[env, agent] >= goal:
        atomic_add(arrived, env, 1)
        rewards[env, agent] = home_reward
    else:
        rewards[env, agent] = -step_cost


@agent_kernel
def finish(env, agent, num_agents, obs, terminated, position, arrived, goal):
    obs[env, agent, 0] = position[env, agent] / goal
    obs[env, agent, 1] = arrived[env] / num_agents
    if agent == 0:
        terminated[env] = arrived[env] == num_agents


@agent_kernel
def place(env, agent, num_agents, rng_states, position, arrived, start_range):
    position[env, agent] = (
        rng.randint(rng_states, rng.agent_stream(env, agent, num_agents), 2 * start_range + 1) - start_range
    )
    if agent == 0:
        arrived[env] = 0


@agent_kernel
def observe(env, agent, num_agents, obs, position, arrived, goal):
    obs[env, agent, 0] = position[env, agent] / goal
    obs[env, agent, 1] = arrived[env] / num_agents


@device_function
def count_arrival(arrived, env):
    atomic_add(arrived, env, 1)


@agent_kernel
def move_via_helper(
    env, agent, num_agents, actions, rng_states, rewards, position, arrived, goal, slip, home_reward, step_cost
):
    """``move``, counting the arrival through a helper."""
    if position[env, agent] >= goal:
        rewards[env, agent] = 0.0
        return
    slipped = rng.uniform(rng_states, rng.agent_stream(env, agent, num_agents)) < slip
    position[env, agent] += 0 if slipped else actions[env, agent] - 1
    if position[env, agent] >= goal:
        count_arrival(arrived, env)
        rewards[env, agent] = home_reward
    else:
        rewards[env, agent] = -step_cost


# ------------------------------------------------------------------ planted races
@agent_kernel
def move_shared_stream(
    env, agent, num_agents, actions, rng_states, rewards, position, arrived, goal, slip, home_reward, step_cost
):
    """RACE: every agent draws from the env's first stream, not its own."""
    if position[env, agent] >= goal:
        rewards[env, agent] = 0.0
        return
    slipped = rng.uniform(rng_states, rng.agent_stream(env, 0, num_agents)) < slip
    position[env, agent] += 0 if slipped else actions[env, agent] - 1
    if position[env, agent] >= goal:
        atomic_add(arrived, env, 1)
        rewards[env, agent] = home_reward
    else:
        rewards[env, agent] = -step_cost


@agent_kernel
def move_lost_update(
    env, agent, num_agents, actions, rng_states, rewards, position, arrived, goal, slip, home_reward, step_cost
):
    """RACE: the shared counter is updated with a plain read-modify-write, not atomic_add."""
    if position[env, agent] >= goal:
        rewards[env, agent] = 0.0
        return
    slipped = rng.uniform(rng_states, rng.agent_stream(env, agent, num_agents)) < slip
    position[env, agent] += 0 if slipped else actions[env, agent] - 1
    if position[env, agent] >= goal:
        arrived[env] += 1
        rewards[env, agent] = home_reward
    else:
        rewards[env, agent] = -step_cost


@agent_kernel
def finish_shared_write(env, agent, num_agents, obs, terminated, position, arrived, goal):
    """RACE: every agent writes the env's terminated flag from its own position (no atomic count)."""
    obs[env, agent, 0] = position[env, agent] / goal
    obs[env, agent, 1] = arrived[env] / num_agents
    terminated[env] = position[env, agent] >= goal


# ------------------------------------------------------------------ exact references
def reference_reset(params, rng_states):
    start = [
        rng.randint(rng_states, agent, 2 * params.start_range + 1) - params.start_range
        for agent in range(params.num_agents)
    ]
    return {"position": np.array(start, np.int32), "arrived": np.int32(0).reshape(())}


def reference_step(params, state, action, rng_states=None, shared_stream=False, last_writer_ends=False):
    """The step, agent by agent in index order (the order the cpu twin runs them in); the flags
    make it the reference of a bug copy."""
    position = np.array(state["position"], np.int32)
    arrived = int(state["arrived"])
    reward = np.zeros(params.num_agents, np.float32)
    for agent in range(params.num_agents):
        if position[agent] >= params.goal:
            continue
        stream = 0 if shared_stream else agent
        slipped = rng.uniform(rng_states, stream) < params.slip
        position[agent] += 0 if slipped else int(action[agent]) - 1
        if position[agent] >= params.goal:
            arrived += 1
            reward[agent] = params.home_reward
        else:
            reward[agent] = -params.step_cost
    terminated = position[-1] >= params.goal if last_writer_ends else arrived == params.num_agents
    return {"position": position, "arrived": np.int32(arrived).reshape(())}, reward, bool(terminated)


def reference_observe(params, state):
    obs = np.empty((params.num_agents, 2), np.float32)
    obs[:, 0] = np.asarray(state["position"]) / params.goal
    obs[:, 1] = int(state["arrived"]) / params.num_agents
    return obs


def state_strategy(params):
    from hypothesis import strategies as st

    def build(positions):
        position = np.array(positions, np.int32)
        return {"position": position, "arrived": np.int32(np.sum(position >= params.goal)).reshape(())}

    cells = st.integers(-params.goal, params.goal)
    # not every agent home: such an env has terminated, its next step is a reset
    return (
        st.lists(cells, min_size=params.num_agents, max_size=params.num_agents)
        .filter(lambda positions: min(positions) < params.goal)
        .map(build)
    )


def check_invariants(params, state):
    home = int(np.sum(np.asarray(state["position"]) >= params.goal))
    assert int(state["arrived"]) == home, f"arrived {int(state['arrived'])} but {home} agents are home"
    assert np.all(np.asarray(state["position"]) <= params.goal), f"position {state['position']} past the goal"


def _spec(
    env_id: str, step_kernel=(move, finish), shared_stream=False, last_writer_ends=False, params=AgentWalkParams()
) -> EnvSpec:
    return EnvSpec(
        id=env_id,
        observation_space=spaces.Box(low=np.array([-np.inf, 0.0], np.float32), high=np.array([1.0, 1.0], np.float32)),
        action_space=spaces.Discrete(3),
        state=(StateArray("position", np.int32, per_agent=True), StateArray("arrived", np.int32)),
        step_kernel=step_kernel,
        reset_kernel=(place, observe),
        reference=CPUReference(
            reference_reset,
            functools.partial(reference_step, shared_stream=shared_stream, last_writer_ends=last_writer_ends),
            reference_observe,
        ),
        params=params,
        num_agents=lambda params: params.num_agents,
        max_episode_steps=20,
        kernel_layout="agent",
        state_strategy=state_strategy,
        invariants=check_invariants,
        description="A multi-agent 1-D walk with agent-layout kernels (the kit's test fixture)",
    )


SPEC = _spec("AgentWalk-v0")
VIA_HELPER = _spec("AgentWalkViaHelper-v0", step_kernel=(move_via_helper, finish))
SHARED_STREAM = _spec("AgentWalkSharedStream-v0", step_kernel=(move_shared_stream, finish), shared_stream=True)
# many agents one step from home, no slips: several often arrive in one step
LOST_UPDATE = _spec(
    "AgentWalkLostUpdate-v0",
    step_kernel=(move_lost_update, finish),
    params=AgentWalkParams(num_agents=8, goal=1, start_range=0, slip=0.0),
)
SHARED_WRITE = _spec("AgentWalkSharedWrite-v0", step_kernel=(move, finish_shared_write), last_writer_ends=True)
