"""Walks whose bugs the hypothesis checks cannot reach in a few dozen steps.

- `GUST` (planted bug, a rare branch): with probability ``gust_probability`` (1e-4 by
  default) a gust pushes the walker one cell; the kernel pushes it left where the reference
  pushes it right. The spec declares ``param_ranges`` for ``gust_probability`` (up to 0.5),
  so the kit draws it at its end and ``parity`` takes the branch. `GUST_NO_RANGE` declares
  none: only the ``long_horizon`` check, replaying envs through the reference for
  thousands of steps, takes the branch.
- `FUEL` (planted bug, a late NaN): one env in 200 leaks fuel, 0.0025 a step; the
  observation shows ``sqrt(fuel)``, which a `device_function` computes without clipping at
  0, so after 400 steps that env's observation is NaN.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from gymnasium import spaces

from kernelgym.core import device_function, env_kernel, rng
from kernelgym.envs.spec import CPUReference, EnvSpec, StateArray


@dataclasses.dataclass(frozen=True)
class GustParams:
    limit: int = 6
    gust_probability: float = 1e-4


@env_kernel
def gust_step(i, actions, obs, rewards, terminated, rng_states, position, limit, gust_probability):
    position[i] = min(max(position[i] + actions[i] - 1, -limit), limit)
    if rng.uniform(rng_states, i) < gust_probability:
        position[i] = min(max(position[i] - 1, -limit), limit)  # BUG: the gust blows right, +1
    terminated[i] = False
    rewards[i] = -abs(position[i]) / limit
    obs[i, 0] = position[i] / limit


@env_kernel
def gust_reset(i, obs, position, limit):
    position[i] = 0
    obs[i, 0] = 0.0


def gust_reference_reset(params, rng_states):
    return {"position": np.int32(0).reshape(())}


def gust_reference_step(params, state, action, rng_states):
    position = min(max(int(state["position"]) + int(action) - 1, -params.limit), params.limit)
    if rng.uniform(rng_states, 0) < params.gust_probability:
        position = min(max(position + 1, -params.limit), params.limit)
    return {"position": np.int32(position).reshape(())}, -abs(position) / params.limit, False


def gust_reference_observe(params, state):
    return np.array([int(state["position"]) / params.limit], np.float32)


def _gust_spec(env_id: str, param_ranges: dict) -> EnvSpec:
    return EnvSpec(
        id=env_id,
        observation_space=spaces.Box(-1.0, 1.0, (1,), np.float32),
        action_space=spaces.Discrete(3),
        state=(StateArray("position", np.int32),),
        step_kernel=gust_step,
        reset_kernel=gust_reset,
        reference=CPUReference(gust_reference_reset, gust_reference_step, gust_reference_observe),
        params=GustParams(),
        max_episode_steps=500,
        param_ranges=param_ranges,
        description="A walk with rare gusts (the kit's test fixture)",
    )


GUST = _gust_spec("GustWalk-v0", {"gust_probability": (0.0, 0.5)})
GUST_NO_RANGE = _gust_spec("GustWalkNoRange-v0", {})
GUST_LINE = "position[i] = min(max(position[i] - 1, -limit), limit)  # BUG"


@dataclasses.dataclass(frozen=True)
class FuelParams:
    leak: float = 0.0025
    leaky_share: float = 0.005


@device_function
def gauge(fuel):
    """BUG: the fuel gauge forgets that a leaking tank goes below 0."""
    return math.sqrt(fuel)


@env_kernel
def fuel_step(i, actions, obs, rewards, terminated, fuel, leaking, leak):
    fuel[i] = fuel[i] - leak * leaking[i]
    terminated[i] = False
    rewards[i] = actions[i] * 0.1
    obs[i, 0] = gauge(fuel[i])
    obs[i, 1] = leaking[i]


@env_kernel
def fuel_reset(i, rng_states, obs, fuel, leaking, leaky_share):
    fuel[i] = 1.0
    leaking[i] = 1.0 if rng.uniform(rng_states, i) < leaky_share else 0.0
    obs[i, 0] = 1.0
    obs[i, 1] = leaking[i]


def fuel_reference_reset(params, rng_states):
    leaking = 1.0 if rng.uniform(rng_states, 0) < params.leaky_share else 0.0
    return {"fuel": np.float64(1.0).reshape(()), "leaking": np.float64(leaking).reshape(())}


def fuel_reference_step(params, state, action, rng_states):
    fuel = np.float64(float(state["fuel"]) - params.leak * float(state["leaking"]))
    return {"fuel": fuel.reshape(()), "leaking": state["leaking"]}, int(action) * 0.1, False


def fuel_reference_observe(params, state):
    return np.array([math.sqrt(max(float(state["fuel"]), 0.0)), float(state["leaking"])], np.float32)


FUEL = EnvSpec(
    id="LeakyFuel-v0",
    observation_space=spaces.Box(0.0, 1.0, (2,), np.float32),
    action_space=spaces.Discrete(2),
    state=(StateArray("fuel", np.float64), StateArray("leaking", np.float64)),
    step_kernel=fuel_step,
    reset_kernel=fuel_reset,
    reference=CPUReference(fuel_reference_reset, fuel_reference_step, fuel_reference_observe),
    params=FuelParams(),
    max_episode_steps=1000,
    description="A tank that leaks in one env of 200 (the kit's test fixture)",
)
GAUGE_LINE = "return math.sqrt(fuel)"

# a spec that cannot be pickled (a lambda, as the Ring template has): the GPU-compile child
# imports it as "kit_fixtures.rare_walk:GUST_LAMBDA_AGENTS"
GUST_LAMBDA_AGENTS = dataclasses.replace(GUST_NO_RANGE, id="GustWalkLambdaAgents-v0", num_agents=lambda params: 1)
