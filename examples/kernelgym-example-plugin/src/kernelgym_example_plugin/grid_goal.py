"""GridGoal-v0: a Dict observation, a small image and a vector; walk to the goal cell.

An agent and a goal start on random cells of a ``size`` x ``size`` grid. Actions 0-3
move +x, -x, +y, -y (clipped to the grid). Reaching the goal ends the episode with
reward +1; every other step costs ``step_cost``. The observation is a ``Dict``: an
``image`` (uint8, channel 0 the agent, channel 1 the goal) and a ``vector``, the goal's
offset from the agent divided by ``size``. Kernels bind its leaves as ``obs_image`` and
``obs_vector`` (``obs_<key>``); the reference observes a dict of the same arrays.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from gymnasium import spaces

from kernelgym.core import device_function, env_kernel, rng
from kernelgym.envs import CPUReference, EnvSpec, StateArray, hookimpl


@dataclasses.dataclass(frozen=True)
class GridGoalParams:
    size: int = 5
    step_cost: float = 0.05

    def __post_init__(self):
        if self.size < 2:
            raise ValueError(f"GridGoalParams: expected size >= 2, got {self}")


@device_function
def observe(i, obs_image, obs_vector, agent, goal, size):
    for y in range(size):
        for x in range(size):
            obs_image[i, 0, y, x] = (x == agent[i, 0]) & (y == agent[i, 1])
            obs_image[i, 1, y, x] = (x == goal[i, 0]) & (y == goal[i, 1])
    for k in range(2):
        obs_vector[i, k] = (goal[i, k] - agent[i, k]) / size


@device_function
def moved(value, action, size):
    """The agent's coordinate on the action's axis (``action // 2``) after the move."""
    return min(max(value + 1 - 2 * (action % 2), 0), size - 1)


@env_kernel
def step(i, actions, obs_image, obs_vector, rewards, terminated, agent, goal, size, step_cost):
    axis = actions[i] // 2
    agent[i, axis] = moved(agent[i, axis], actions[i], size)
    at_goal = (agent[i, 0] == goal[i, 0]) & (agent[i, 1] == goal[i, 1])
    terminated[i], rewards[i] = at_goal, 1.0 if at_goal else -step_cost
    observe(i, obs_image, obs_vector, agent, goal, size)


@env_kernel
def reset(i, rng_states, obs_image, obs_vector, agent, goal, size):
    for k in range(2):
        agent[i, k], goal[i, k] = rng.randint(rng_states, i, size), rng.randint(rng_states, i, size)
    observe(i, obs_image, obs_vector, agent, goal, size)


def _reference_reset(params, rng_states):
    agent, goal = np.zeros(2, np.int32), np.zeros(2, np.int32)
    for k in range(2):
        agent[k], goal[k] = rng.randint(rng_states, 0, params.size), rng.randint(rng_states, 0, params.size)
    return {"agent": agent, "goal": goal}


def _reference_step(params, state, action, rng_states):
    agent = state["agent"].copy()
    agent[int(action) // 2] = moved(agent[int(action) // 2], int(action), params.size)
    at_goal = bool(np.all(agent == state["goal"]))
    return {"agent": agent, "goal": state["goal"].copy()}, 1.0 if at_goal else -params.step_cost, at_goal


def _reference_observe(params, state):
    image, vector = np.zeros((1, 2, params.size, params.size), np.uint8), np.zeros((1, 2), np.float32)
    observe(0, image, vector, state["agent"][None], state["goal"][None], params.size)
    return {"image": image[0], "vector": vector[0]}


def _observation_space(params):
    return spaces.Dict(
        {
            "image": spaces.Box(0, 1, (2, params.size, params.size), np.uint8),
            "vector": spaces.Box(-1.0, 1.0, (2,), np.float32),
        }
    )


SPEC = EnvSpec(
    id="GridGoal-v0",
    observation_space=_observation_space,
    action_space=spaces.Discrete(4),
    state=(
        # cells index the image: set_state refuses one off the grid
        StateArray("agent", np.int32, (2,), low=0, high=lambda params: params.size - 1),
        StateArray("goal", np.int32, (2,), low=0, high=lambda params: params.size - 1),
    ),
    step_kernel=step,
    reset_kernel=reset,
    reference=CPUReference(_reference_reset, _reference_step, _reference_observe),
    params=GridGoalParams(),
    max_episode_steps=20,
    description="Walk to the goal, seen in an image (example plugin).",
)


@hookimpl
def kernelgym_register_envs():
    return [SPEC]
