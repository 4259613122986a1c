"""DictWalk: a nested Dict/Tuple observation with every leaf kind, and MultiBinary actions.

A walker on the integers: action ``a`` (MultiBinary(3)) moves it by ``a[0] - a[1]`` and
``a`` is kept as its flags. It terminates when ``|position|`` reaches ``goal``.
Observation leaves, one of each kind and several dtypes, bound by kernels by key path:

- ``obs_position``: Box float64 (1,), the position;
- ``obs_flags``: MultiBinary(3) (int8), the last action;
- ``obs_nested_count``: Discrete(100) (int64), the steps taken (at most 99);
- ``obs_nested_pair_0``: Box uint8 (2,), position + goal and the count;
- ``obs_nested_pair_1``: Box float32 (2, 2), the flags halved.

Planted bugs: ``step_stale_pair`` never writes ``obs_nested_pair_1``; ``step_nan_position``
writes NaN into ``obs_position`` once the walker stands on 0 after a step (``NAN_LINE``).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from gymnasium import spaces

from kernelgym.core import device_function, env_kernel, rng
from kernelgym.envs.spec import CPUReference, EnvSpec, StateArray


@dataclasses.dataclass(frozen=True)
class DictWalkParams:
    goal: int = 4


OBSERVATION_SPACE = spaces.Dict(
    {
        "position": spaces.Box(-10.0, 10.0, (1,), np.float64),
        "flags": spaces.MultiBinary(3),
        "nested": spaces.Dict(
            {
                "count": spaces.Discrete(100),
                "pair": spaces.Tuple((spaces.Box(0, 255, (2,), np.uint8), spaces.Box(-1.0, 1.0, (2, 2), np.float32))),
            }
        ),
    }
)


@device_function
def observe(
    i, obs_position, obs_flags, obs_nested_count, obs_nested_pair_0, obs_nested_pair_1, position, count, flags, goal
):
    obs_position[i, 0] = position[i]
    obs_nested_count[i] = count[i]
    obs_nested_pair_0[i, 0] = position[i] + goal
    obs_nested_pair_0[i, 1] = count[i]
    for k in range(3):
        obs_flags[i, k] = flags[i, k]
    for k in range(4):
        obs_nested_pair_1[i, k // 2, k % 2] = 0.5 * flags[i, k % 3]


@device_function
def walk(i, actions, rewards, terminated, position, count, flags, goal):
    """The walker's move, flags, count, termination and reward (every step variant's)."""
    position[i] += actions[i, 0] - actions[i, 1]
    for k in range(3):
        flags[i, k] = actions[i, k]
    count[i] = min(count[i] + 1, 99)
    terminated[i] = abs(position[i]) >= goal
    rewards[i] = 1.0 if terminated[i] else -0.1


@env_kernel
def step(
    i,
    actions,
    obs_position,
    obs_flags,
    obs_nested_count,
    obs_nested_pair_0,
    obs_nested_pair_1,
    rewards,
    terminated,
    position,
    count,
    flags,
    goal,
):
    walk(i, actions, rewards, terminated, position, count, flags, goal)
    observe(
        i, obs_position, obs_flags, obs_nested_count, obs_nested_pair_0, obs_nested_pair_1, position, count, flags, goal
    )


@env_kernel
def step_stale_pair(
    i,
    actions,
    obs_position,
    obs_flags,
    obs_nested_count,
    obs_nested_pair_0,
    rewards,
    terminated,
    position,
    count,
    flags,
    goal,
):
    """BUG: the step leaves the leaf ``obs_nested_pair_1`` as the reset wrote it."""
    walk(i, actions, rewards, terminated, position, count, flags, goal)
    obs_position[i, 0] = position[i]
    obs_nested_count[i] = count[i]
    obs_nested_pair_0[i, 0] = position[i] + goal
    obs_nested_pair_0[i, 1] = count[i]
    for k in range(3):
        obs_flags[i, k] = flags[i, k]


NAN_LINE = "obs_position[i, 0] = math.nan"


@env_kernel
def step_nan_position(
    i,
    actions,
    obs_position,
    obs_flags,
    obs_nested_count,
    obs_nested_pair_0,
    obs_nested_pair_1,
    rewards,
    terminated,
    position,
    count,
    flags,
    goal,
):
    """BUG: a NaN in the ``obs_position`` leaf where the walker stands on 0 after the step."""
    walk(i, actions, rewards, terminated, position, count, flags, goal)
    observe(
        i, obs_position, obs_flags, obs_nested_count, obs_nested_pair_0, obs_nested_pair_1, position, count, flags, goal
    )
    if position[i] == 0:
        obs_position[i, 0] = math.nan


@env_kernel
def reset(
    i,
    rng_states,
    obs_position,
    obs_flags,
    obs_nested_count,
    obs_nested_pair_0,
    obs_nested_pair_1,
    position,
    count,
    flags,
    goal,
):
    position[i] = rng.randint(rng_states, i, 2 * goal - 1) - goal + 1
    observe(
        i, obs_position, obs_flags, obs_nested_count, obs_nested_pair_0, obs_nested_pair_1, position, count, flags, goal
    )


def _reset(params, rng_states):
    position = rng.randint(rng_states, 0, 2 * params.goal - 1) - params.goal + 1
    return {"position": np.int32(position).reshape(()), "count": np.int32(0).reshape(()), "flags": np.zeros(3, np.int8)}


def _step(params, state, action, rng_states):
    action = np.asarray(action, np.int64)
    position = int(state["position"]) + int(action[0]) - int(action[1])
    new = {
        "position": np.int32(position).reshape(()),
        "count": np.int32(min(int(state["count"]) + 1, 99)).reshape(()),
        "flags": action.astype(np.int8),
    }
    done = abs(position) >= params.goal
    return new, 1.0 if done else -0.1, done


def _observe(params, state):
    flags = state["flags"]
    return {
        "position": np.array([state["position"]], np.float64),
        "flags": flags.astype(np.int8),
        "nested": {
            "count": np.int64(state["count"]),
            "pair": (
                np.array([state["position"] + params.goal, state["count"]], np.uint8),
                np.array([[0.5 * flags[k % 3] for k in (0, 1)], [0.5 * flags[k % 3] for k in (2, 3)]], np.float32),
            ),
        },
    }


STATE = (
    StateArray("position", np.int32),
    StateArray("count", np.int32, restore_on_reset=True),
    StateArray("flags", np.int8, (3,), restore_on_reset=True),
)
SPEC = EnvSpec(
    id="DictWalk-v0",
    observation_space=OBSERVATION_SPACE,
    action_space=spaces.MultiBinary(3),
    state=STATE,
    step_kernel=step,
    reset_kernel=reset,
    reference=CPUReference(_reset, _step, _observe),
    params=DictWalkParams(),
    max_episode_steps=12,
)
STALE_PAIR = dataclasses.replace(SPEC, id="DictWalkStalePair-v0", step_kernel=step_stale_pair)
NAN_POSITION = dataclasses.replace(SPEC, id="DictWalkNanPosition-v0", step_kernel=step_nan_position)
