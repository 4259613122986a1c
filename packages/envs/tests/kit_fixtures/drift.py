"""Drift: a 1-D point pushed left or right at a per-env ``speed`` (`EnvSpec.per_env_params`).

``HARDCODED_SPEED`` is a copy whose step uses the default speed as a literal instead of
the param: it agrees with the reference at the default params, and only the kit's
``per_env_params`` check, which gives each env its own speed, finds it.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from gymnasium import spaces

from kernelgym.core import env_kernel, rng
from kernelgym.envs.spec import CPUReference, EnvSpec, StateArray


@dataclasses.dataclass(frozen=True)
class DriftParams:
    speed: float = 0.5
    start: float = 1.0
    limit: float = 4.0

    def __post_init__(self):
        if not self.speed > 0 or not 0 < self.start < self.limit:
            raise ValueError(f"DriftParams: expected speed > 0 and 0 < start < limit, got {self}")


@env_kernel
def step(i, actions, obs, rewards, terminated, x, speed, limit):
    x[i] = x[i] + (speed if actions[i] == 1 else -speed)
    terminated[i] = abs(x[i]) > limit
    rewards[i] = -abs(x[i])
    obs[i, 0] = x[i]


@env_kernel
def step_hardcoded_speed(i, actions, obs, rewards, terminated, x, speed, limit):
    """BUG: the default speed as a literal."""
    x[i] = x[i] + (0.5 if actions[i] == 1 else -0.5)
    terminated[i] = abs(x[i]) > limit
    rewards[i] = -abs(x[i])
    obs[i, 0] = x[i]


@env_kernel
def reset(i, rng_states, obs, x, start):
    x[i] = rng.uniform_range(rng_states, i, -start, start)
    obs[i, 0] = x[i]


def reference_reset(params, rng_states):
    return {"x": np.float64(rng.uniform_range(rng_states, 0, -params.start, params.start)).reshape(())}


def reference_step(params, state, action, rng_states):
    x = float(state["x"]) + (params.speed if int(action) == 1 else -params.speed)
    return {"x": np.float64(x).reshape(())}, -abs(x), abs(x) > params.limit


def reference_observe(params, state):
    return np.array([state["x"]])


def _spec(env_id, step_kernel=step):
    return EnvSpec(
        id=env_id,
        observation_space=spaces.Box(-np.inf, np.inf, (1,), np.float64),
        action_space=spaces.Discrete(2),
        state=(StateArray("x", np.float64),),
        step_kernel=step_kernel,
        reset_kernel=reset,
        reference=CPUReference(reference_reset, reference_step, reference_observe),
        params=DriftParams(),
        max_episode_steps=20,
        per_env_params=("speed", "start"),
        description="A point drifting at a per-env speed (the kit's test fixture)",
    )


SPEC = _spec("Drift-v0")
HARDCODED_SPEED = _spec("DriftHardcodedSpeed-v0", step_hardcoded_speed)
