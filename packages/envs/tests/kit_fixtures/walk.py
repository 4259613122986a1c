"""Walk: a tiny 1-D env, correct, and copies of it with one planted bug each.

An agent walks on the integers; action 0 steps left, 1 stays, 2 steps right. The
episode terminates when ``|position|`` reaches ``goal`` (reward ``goal_reward``); every
other step costs ``step_cost``. ``energy`` is a moving average of how much the agent
moves. Observation: ``(position / goal, energy)``. Start: a uniform position in
``[-start_range, start_range]``, energy 0.

Each ``step_*``/``reset_*`` kernel below is the correct one with a single bug the kit
must find; the specs at the end name them. The reference is exact: it draws the start
position from the env's own ``kernelgym.core.rng`` stream, as the kernel does. Every kernel is self-contained (no shared
helpers), so numba's on-disk cache never serves a stale build of a helper.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from gymnasium import spaces

from kernelgym.core import env_kernel, rng
from kernelgym.envs.spec import CPUReference, EnvSpec, StateArray


@dataclasses.dataclass(frozen=True)
class WalkParams:
    goal: int = 4
    start_range: int = 2
    goal_reward: float = 10.0
    step_cost: float = 0.1


@env_kernel
def step(i, actions, obs, rewards, terminated, position, energy, goal, goal_reward, step_cost):
    move = actions[i] - 1
    position[i] += move
    energy[i] = 0.9 * energy[i] + 0.1 * abs(move)
    done = abs(position[i]) >= goal
    terminated[i] = done
    rewards[i] = goal_reward if done else -step_cost
    obs[i, 0] = position[i] / goal
    obs[i, 1] = energy[i]


@env_kernel
def reset(i, rng_states, obs, position, energy, goal, start_range):
    position[i] = rng.randint(rng_states, i, 2 * start_range + 1) - start_range
    energy[i] = 0.0
    obs[i, 0] = position[i] / goal
    obs[i, 1] = energy[i]


# ------------------------------------------------------------------ planted bugs
@env_kernel
def step_off_by_one(i, actions, obs, rewards, terminated, position, energy, goal, goal_reward, step_cost):
    """BUG: the energy is written one column past the observation row (at a column computed from
    the data, which the launch check cannot see: a constant one it refuses before any launch)."""
    move = actions[i] - 1
    position[i] += move
    energy[i] = 0.9 * energy[i] + 0.1 * abs(move)
    done = abs(position[i]) >= goal
    terminated[i] = done
    rewards[i] = goal_reward if done else -step_cost
    obs[i, 0] = position[i] / goal
    obs[i, 1] = energy[i]
    past = 2 if energy[i] >= 0.0 else 1  # energy never drops below 0: always column 2
    obs[i, past] = energy[i]


@env_kernel
def reset_missed_energy(i, rng_states, obs, position, energy, goal, start_range):
    """BUG: the reset forgets to clear the energy."""
    position[i] = rng.randint(rng_states, i, 2 * start_range + 1) - start_range
    obs[i, 0] = position[i] / goal
    obs[i, 1] = energy[i]


@env_kernel
def step_cross_talk(i, actions, obs, rewards, terminated, position, energy, goal, goal_reward, step_cost):
    """BUG: the energy update reads the next env's action."""
    move = actions[i] - 1
    neighbour_move = actions[(i + 1) % actions.shape[0]] - 1
    position[i] += move
    energy[i] = 0.9 * energy[i] + 0.1 * abs(neighbour_move)
    done = abs(position[i]) >= goal
    terminated[i] = done
    rewards[i] = goal_reward if done else -step_cost
    obs[i, 0] = position[i] / goal
    obs[i, 1] = energy[i]


@env_kernel
def reset_nondeterministic(i, obs, position, energy, goal, start_range):
    """BUG: the reset draws its start from numba's global RNG, not the env's seeded stream."""
    position[i] = np.random.randint(-start_range, start_range + 1)
    energy[i] = 0.0
    obs[i, 0] = position[i] / goal
    obs[i, 1] = energy[i]


@env_kernel
def step_reward_ignores_termination(i, actions, obs, rewards, terminated, position, energy, goal, step_cost):
    """BUG: the reward is the step cost even on the step that reaches the goal."""
    move = actions[i] - 1
    position[i] += move
    energy[i] = 0.9 * energy[i] + 0.1 * abs(move)
    terminated[i] = abs(position[i]) >= goal
    rewards[i] = -step_cost
    obs[i, 0] = position[i] / goal
    obs[i, 1] = energy[i]


# ------------------------------------------------------------------ exact reference
def reference_reset(params, rng_states):
    position = rng.randint(rng_states, 0, 2 * params.start_range + 1) - params.start_range
    return {"position": np.int32(position).reshape(()), "energy": np.float32(0.0).reshape(())}


def reference_step(params, state, action, rng_states=None):
    move = int(action) - 1
    position = int(state["position"]) + move
    energy = np.float32(0.9 * float(state["energy"]) + 0.1 * abs(move))
    terminated = abs(position) >= params.goal
    reward = params.goal_reward if terminated else -params.step_cost
    return {"position": np.int32(position).reshape(()), "energy": energy.reshape(())}, reward, terminated


def reference_observe(params, state):
    return np.array([int(state["position"]) / params.goal, float(state["energy"])], dtype=np.float32)


REFERENCE = CPUReference(reference_reset, reference_step, reference_observe)


def state_strategy(params):
    from hypothesis import strategies as st

    return st.fixed_dictionaries(
        {
            "position": st.integers(-params.goal + 1, params.goal - 1).map(lambda p: np.int32(p).reshape(())),
            "energy": st.floats(0.0, 1.0, width=32).map(lambda e: np.float32(e).reshape(())),
        }
    )


def check_invariants(params, state):
    assert abs(int(state["position"])) <= params.goal, f"position {state['position']} beyond the goal"
    assert 0.0 <= float(state["energy"]) <= 1.0, f"energy {state['energy']} outside [0, 1]"


def _spec(env_id: str, step_kernel=step, reset_kernel=reset) -> EnvSpec:
    return EnvSpec(
        id=env_id,
        observation_space=spaces.Box(low=np.array([-1.0, 0.0], np.float32), high=np.array([1.0, 1.0], np.float32)),
        action_space=spaces.Discrete(3),
        state=(StateArray("position", np.int32), StateArray("energy", np.float32)),
        step_kernel=step_kernel,
        reset_kernel=reset_kernel,
        reference=REFERENCE,
        params=WalkParams(),
        max_episode_steps=50,
        state_strategy=state_strategy,
        invariants=check_invariants,
        description="A 1-D walk to a goal (the kit's test fixture)",
    )


SPEC = _spec("Walk-v0")
OFF_BY_ONE = _spec("WalkOffByOne-v0", step_kernel=step_off_by_one)
MISSED_RESET = _spec("WalkMissedReset-v0", reset_kernel=reset_missed_energy)
CROSS_TALK = _spec("WalkCrossTalk-v0", step_kernel=step_cross_talk)
NONDETERMINISTIC = _spec("WalkNondeterministic-v0", reset_kernel=reset_nondeterministic)
REWARD_IGNORES_TERMINATION = _spec("WalkRewardIgnoresTermination-v0", step_kernel=step_reward_ignores_termination)
