"""A push with the clip pattern users write, ``min(max(u, -1.0), 1.0)`` on a float32 action.

In the CUDA simulator this returned a Python float on one branch and ``np.float32`` on the
other, so ``0.01 * u * u`` was float64 for a clipped action and float32 for one inside the
Box (NumPy 2 keeps a Python float "weak"), and the kit wrongly reported that an action
outside the Box was not clipped. The simulator now types both as numba does (float64).

- `SPEC`: correct; its cpu and sim trajectories are bitwise the same.
- `SQRT_OF_NEGATIVE` (planted bug): the observation shows ``sqrt(speed - drag)``, negative
  below the drag: NaN on cpu and GPU, where the simulator raised ``ValueError: math domain
  error`` before. The kit must name the line on both backends.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from gymnasium import spaces

from kernelgym.core import env_kernel
from kernelgym.envs.spec import CPUReference, EnvSpec, StateArray


@dataclasses.dataclass(frozen=True)
class PushParams:
    drag: float = 0.05


@env_kernel
def step(i, actions, obs, rewards, terminated, speed, drag):
    u = min(max(actions[i, 0], -1.0), 1.0)
    speed[i] = (1.0 - drag) * speed[i] + 0.01 * u * u
    terminated[i] = False
    rewards[i] = -0.01 * u * u
    obs[i, 0] = speed[i]
    obs[i, 1] = math.sqrt(max(speed[i] - drag, 0.0))


@env_kernel
def step_sqrt_of_negative(i, actions, obs, rewards, terminated, speed, drag):
    u = min(max(actions[i, 0], -1.0), 1.0)
    speed[i] = (1.0 - drag) * speed[i] + 0.01 * u * u
    terminated[i] = False
    rewards[i] = -0.01 * u * u
    obs[i, 0] = speed[i]
    obs[i, 1] = math.sqrt(speed[i] - drag)  # BUG: negative below the drag


@env_kernel
def reset(i, obs, speed):
    speed[i] = 0.0
    obs[i, 0] = 0.0
    obs[i, 1] = 0.0


def reference_reset(params, rng_states):
    return {"speed": np.float32(0.0).reshape(())}


def reference_step(params, state, action, rng_states):
    u = min(max(float(action[0]), -1.0), 1.0)
    speed = np.float32((1.0 - params.drag) * float(state["speed"]) + 0.01 * u * u)
    return {"speed": speed.reshape(())}, -0.01 * u * u, False


def reference_observe(params, state):
    speed = float(state["speed"])
    return np.array([speed, math.sqrt(max(speed - params.drag, 0.0))], np.float32)


def _spec(env_id: str, step_kernel) -> EnvSpec:
    return EnvSpec(
        id=env_id,
        observation_space=spaces.Box(0.0, np.inf, (2,), np.float32),
        action_space=spaces.Box(-1.0, 1.0, (1,), np.float32),
        state=(StateArray("speed", np.float32),),
        step_kernel=step_kernel,
        reset_kernel=reset,
        reference=CPUReference(reference_reset, reference_step, reference_observe),
        params=PushParams(),
        max_episode_steps=50,
        description="A clipped push (the kit's test fixture)",
    )


SPEC = _spec("ClipPush-v0", step)
SQRT_OF_NEGATIVE = _spec("ClipPushSqrtOfNegative-v0", step_sqrt_of_negative)
SQRT_LINE = "obs[i, 1] = math.sqrt(speed[i] - drag)  # BUG"
