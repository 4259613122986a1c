"""GoalWalk: a 1-D walk to a goal the trainer sets (a ``keep_on_reset`` state array).

The agent walks on ``[-limit, limit]`` (0 left, 1 stay, 2 right) to ``goal``, which
the trainer writes with ``set_state`` and every reset keeps; the reset draws a start
position away from it. Reaching it ends the episode with reward 1, each other step
costs 0.1. Observation: ``(position, goal) / limit``. ``RESET_OVERWRITES_GOAL`` is a
copy whose reset writes the goal back to 0, a bug the kit must find.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from gymnasium import spaces

from kernelgym.core import env_kernel, rng
from kernelgym.envs.spec import CPUReference, EnvSpec, StateArray


@dataclasses.dataclass(frozen=True)
class GoalWalkParams:
    limit: int = 5


@env_kernel
def step(i, actions, obs, rewards, terminated, position, goal, limit):
    position[i] = min(max(position[i] + actions[i] - 1, -limit), limit)
    terminated[i] = position[i] == goal[i]
    rewards[i] = 1.0 if position[i] == goal[i] else -0.1
    obs[i, 0] = position[i] / limit
    obs[i, 1] = goal[i] / limit


@env_kernel
def reset(i, rng_states, obs, position, goal, limit):
    start = rng.randint(rng_states, i, 2 * limit + 1) - limit
    position[i] = start if start != goal[i] else -goal[i] if goal[i] != 0 else limit
    obs[i, 0] = position[i] / limit
    obs[i, 1] = goal[i] / limit


@env_kernel
def reset_overwrites_goal(i, rng_states, obs, position, goal, limit):
    """BUG: the reset forgets that the goal is the trainer's."""
    goal[i] = 0
    start = rng.randint(rng_states, i, 2 * limit + 1) - limit
    position[i] = start if start != goal[i] else -goal[i] if goal[i] != 0 else limit
    obs[i, 0] = position[i] / limit
    obs[i, 1] = goal[i] / limit


def reference_reset(params, rng_states, kept):
    goal = int(kept["goal"])
    start = int(rng.randint(rng_states, 0, 2 * params.limit + 1)) - params.limit
    position = start if start != goal else -goal if goal != 0 else params.limit
    return {"position": np.int32(position).reshape(())}


def reference_step(params, state, action, rng_states):
    position = min(max(int(state["position"]) + int(action) - 1, -params.limit), params.limit)
    done = position == int(state["goal"])
    return {"position": np.int32(position).reshape(()), "goal": state["goal"]}, 1.0 if done else -0.1, done


def reference_observe(params, state):
    return np.array([int(state["position"]) / params.limit, int(state["goal"]) / params.limit], np.float32)


def state_strategy(params):
    from hypothesis import strategies as st

    cells = st.integers(-params.limit, params.limit)
    return (
        st.tuples(cells, cells)
        .filter(lambda pair: pair[0] != pair[1])
        .map(lambda pair: {"position": np.int32(pair[0]).reshape(()), "goal": np.int32(pair[1]).reshape(())})
    )


def _spec(env_id: str, reset_kernel=reset) -> EnvSpec:
    return EnvSpec(
        id=env_id,
        observation_space=spaces.Box(-1.0, 1.0, (2,), np.float32),
        action_space=spaces.Discrete(3),
        state=(StateArray("position", np.int32), StateArray("goal", np.int32, initial=3, keep_on_reset=True)),
        step_kernel=step,
        reset_kernel=reset_kernel,
        reference=CPUReference(reference_reset, reference_step, reference_observe),
        params=GoalWalkParams(),
        max_episode_steps=20,
        state_strategy=state_strategy,
        description="A 1-D walk to a trainer-set goal (the kit's test fixture)",
    )


SPEC = _spec("GoalWalk-v0")
RESET_OVERWRITES_GOAL = _spec("GoalWalkResetOverwritesGoal-v0", reset_kernel=reset_overwrites_goal)
