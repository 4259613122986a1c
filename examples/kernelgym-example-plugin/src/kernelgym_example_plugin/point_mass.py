"""PointMass-v0: push a point mass to the origin with a 2-D force (continuous actions).

The mass starts at rest at a uniform position in ``[-1, 1]^2``. Each step the action, a
force in ``[-1, 1]^2``, accelerates it (``velocity += dt * force``, damped by ``damping``),
it moves (``position += dt * velocity``) and is rewarded ``-|position|``. It observes its
position and velocity. Episodes end at the time limit.

The template of a ``Box`` action env: the action of env ``i`` is the row ``actions[i]``
(float32), finite (checked before the step runs); like gymnasium's own Box envs, the env
clips it to the space (the kit's ``invalid_actions`` check holds it to that).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from gymnasium import spaces

from kernelgym.core import device_function, env_kernel, rng
from kernelgym.envs import CPUReference, EnvSpec, StateArray, hookimpl


@dataclasses.dataclass(frozen=True)
class PointMassParams:
    dt: float = 0.1
    damping: float = 0.1

    def __post_init__(self):
        if not self.dt > 0.0 or not 0.0 <= self.damping < 1.0:
            raise ValueError(f"PointMassParams: expected dt > 0 and 0 <= damping < 1, got {self}")


@device_function
def push(x, v, force, dt, damping):
    """One axis: the new (position, velocity) after a force, clipped to the action space."""
    v = (1.0 - damping) * v + dt * min(max(force, -1.0), 1.0)
    return x + dt * v, v


@env_kernel
def step(i, actions, obs, rewards, position, velocity, dt, damping):
    for axis in range(2):
        position[i, axis], velocity[i, axis] = push(position[i, axis], velocity[i, axis], actions[i, axis], dt, damping)
        obs[i, axis], obs[i, 2 + axis] = position[i, axis], velocity[i, axis]
    rewards[i] = -math.sqrt(position[i, 0] * position[i, 0] + position[i, 1] * position[i, 1])


@env_kernel
def reset(i, rng_states, obs, position, velocity):
    for axis in range(2):
        position[i, axis], velocity[i, axis] = rng.uniform_range(rng_states, i, -1.0, 1.0), 0.0
        obs[i, axis], obs[i, 2 + axis] = position[i, axis], 0.0


def _reference_reset(params, rng_states):
    return {
        "position": np.array([rng.uniform_range(rng_states, 0, -1.0, 1.0) for _ in range(2)]),
        "velocity": np.zeros(2),
    }


def _reference_step(params, state, action, rng_states):
    moved = [
        push(state["position"][k], state["velocity"][k], np.float64(np.float32(action[k])), params.dt, params.damping)
        for k in range(2)
    ]
    position, velocity = np.array([m[0] for m in moved]), np.array([m[1] for m in moved])
    return (
        {"position": position, "velocity": velocity},
        -math.sqrt(position[0] * position[0] + position[1] * position[1]),
        False,
    )


reference = CPUReference(
    _reference_reset,
    _reference_step,
    lambda params, state: np.concatenate([state["position"], state["velocity"]]).astype(np.float32),
)

SPEC = EnvSpec(
    id="PointMass-v0",
    observation_space=spaces.Box(-np.inf, np.inf, (4,), np.float32),
    action_space=spaces.Box(-1.0, 1.0, (2,), np.float32),
    # no state value indexes anything: any float is a state the physics can step
    state=(
        StateArray("position", np.float64, (2,), low=-np.inf, high=np.inf),
        StateArray("velocity", np.float64, (2,), low=-np.inf, high=np.inf),
    ),
    step_kernel=step,
    reset_kernel=reset,
    reference=reference,
    params=PointMassParams(),
    max_episode_steps=100,
    description="Push a point mass to the origin with a 2-D force (example plugin).",
)


@hookimpl
def kernelgym_register_envs():
    return [SPEC]
