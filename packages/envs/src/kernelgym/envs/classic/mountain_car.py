"""MountainCar-v0: gymnasium's classic-control mountain car as a kernelgym env.

Dynamics, reward and termination follow ``gymnasium.envs.classic_control.MountainCarEnv``:
state and observation ``(position, velocity)``, three discrete actions (push left,
no push, push right), reward -1 per step, terminated when the car reaches the flag
(``position >= goal_position`` and ``velocity >= goal_velocity``), truncated after 200
steps. Reset draws the position from U(-0.6, -0.4) with zero velocity. The state is
stored in float32; the arithmetic runs in float64 like gymnasium's.
"""

import dataclasses
import math

import numba
import numpy as np
from gymnasium import spaces

from kernelgym.core import device_function, env_kernel, rng
from kernelgym.envs.hookspecs import hookimpl
from kernelgym.envs.spec import CPUReference, EnvSpec, StateArray

MIN_POSITION = -1.2
MAX_POSITION = 0.6
MAX_SPEED = 0.07
MAX_EPISODE_STEPS = 200
RESET_LOW = -0.6
RESET_HIGH = -0.4


@dataclasses.dataclass(frozen=True)
class MountainCarParams:
    """gymnasium's constants; ``goal_velocity`` is gymnasium's constructor argument."""

    force: float = 0.001
    gravity: float = 0.0025
    goal_position: float = 0.5
    goal_velocity: float = 0.0

    def __post_init__(self):
        if not MIN_POSITION < self.goal_position <= MAX_POSITION:
            raise ValueError(
                f"MountainCarParams goal_position: expected a value in ({MIN_POSITION}, {MAX_POSITION}], "
                f"got {self.goal_position!r}"
            )
        if not self.force >= 0:
            raise ValueError(f"MountainCarParams force: expected a value >= 0, got {self.force!r}")


# ------------------------------------------------------------------ physics (one env)
@numba.njit(inline="always")
def mountain_car_transition(position, velocity, action, force, gravity, goal_position, goal_velocity):
    """One MountainCar step for one env, in float64.

    Returns
    -------
    (new_position, new_velocity, terminated)
    """
    velocity += (action - 1) * force + math.cos(3.0 * position) * (-gravity)
    velocity = min(max(velocity, -MAX_SPEED), MAX_SPEED)
    position += velocity
    position = min(max(position, MIN_POSITION), MAX_POSITION)
    # the left wall is inelastic: the car stops there
    if position == MIN_POSITION and velocity < 0.0:
        velocity = 0.0
    terminated = position >= goal_position and velocity >= goal_velocity
    return position, velocity, terminated


@device_function
def _reset_env(i, rng_states, obs, position, velocity):
    position[i] = rng.uniform_range(rng_states, i, RESET_LOW, RESET_HIGH)
    velocity[i] = 0.0
    obs[i, 0] = position[i]
    obs[i, 1] = velocity[i]


# ------------------------------------------------------------------------- kernels
@env_kernel
def step_kernel(i, actions, rng_states, reset_mask, obs, rewards, terminated, position, velocity,
                force, gravity, goal_position, goal_velocity):
    """Step env ``i`` (or reset it when its previous step ended the episode)."""
    if reset_mask[i]:
        _reset_env(i, rng_states, obs, position, velocity)
        rewards[i] = 0.0
        terminated[i] = False
    else:
        new_position, new_velocity, done = mountain_car_transition(
            np.float64(position[i]), np.float64(velocity[i]), actions[i],
            force, gravity, goal_position, goal_velocity,
        )
        position[i] = new_position
        velocity[i] = new_velocity
        obs[i, 0] = position[i]
        obs[i, 1] = velocity[i]
        rewards[i] = -1.0
        terminated[i] = done


@env_kernel
def reset_kernel(i, rng_states, reset_mask, obs, position, velocity, force, gravity, goal_position, goal_velocity):
    """Draw a fresh start state for env ``i`` when its reset flag is set."""
    if reset_mask[i]:
        _reset_env(i, rng_states, obs, position, velocity)


# ---------------------------------------------------------------- CPU reference
def reference_reset(params, generator):
    """Single-env reset with a numpy Generator (same distribution as the kernel)."""
    return {
        "position": np.float32(generator.uniform(RESET_LOW, RESET_HIGH)).reshape(()),
        "velocity": np.float32(0.0).reshape(()),
    }


def reference_step(params, state, action, generator=None):
    """Single-env step in plain numpy, written after gymnasium's ``MountainCarEnv.step``."""
    position = float(state["position"])
    velocity = float(state["velocity"])
    velocity += (int(action) - 1) * params.force + math.cos(3 * position) * (-params.gravity)
    velocity = float(np.clip(velocity, -MAX_SPEED, MAX_SPEED))
    position += velocity
    position = float(np.clip(position, MIN_POSITION, MAX_POSITION))
    if position == MIN_POSITION and velocity < 0:
        velocity = 0.0
    terminated = bool(position >= params.goal_position and velocity >= params.goal_velocity)
    new_state = {"position": np.float32(position).reshape(()), "velocity": np.float32(velocity).reshape(())}
    return new_state, -1.0, terminated


def reference_observe(params, state):
    """Observation ``(position, velocity)`` of one env state."""
    return np.array([state["position"], state["velocity"]], dtype=np.float32)


REFERENCE = CPUReference(reset=reference_reset, step=reference_step, observe=reference_observe)


def state_strategy(params):
    """Hypothesis strategy of single-env states inside the position and speed bounds."""
    from hypothesis import strategies as st

    def floats(low, high):
        # float32 bounds, rounded inward so hypothesis accepts them and states stay inside
        low = float(np.nextafter(np.float32(low), np.float32(np.inf)))
        high = float(np.nextafter(np.float32(high), np.float32(-np.inf)))
        return st.floats(low, high, width=32).map(lambda value: np.float32(value).reshape(()))

    return st.fixed_dictionaries(
        {"position": floats(MIN_POSITION, MAX_POSITION), "velocity": floats(-MAX_SPEED, MAX_SPEED)}
    )


def check_invariants(params, state):
    """Position and velocity stay inside gymnasium's observation bounds."""
    position, velocity = float(state["position"]), float(state["velocity"])
    # bounds compared in float32, the dtype the state is stored in
    assert np.float32(MIN_POSITION) <= position <= np.float32(MAX_POSITION), f"position {position} off the track"
    assert abs(velocity) <= np.float32(MAX_SPEED), f"velocity {velocity} beyond {MAX_SPEED}"


SPEC = EnvSpec(
    id="MountainCar-v0",
    observation_space=spaces.Box(
        low=np.array([MIN_POSITION, -MAX_SPEED], dtype=np.float32),
        high=np.array([MAX_POSITION, MAX_SPEED], dtype=np.float32),
        dtype=np.float32,
    ),
    action_space=spaces.Discrete(3),
    state=(StateArray("position", np.float32), StateArray("velocity", np.float32)),
    step_kernel=f"{__name__}:step_kernel",
    reset_kernel=f"{__name__}:reset_kernel",
    reference=f"{__name__}:REFERENCE",
    params=MountainCarParams(),
    max_episode_steps=MAX_EPISODE_STEPS,
    render="kernelgym.envs.render:render_mountain_car",
    render_fps=30,
    state_strategy=f"{__name__}:state_strategy",
    invariants=f"{__name__}:check_invariants",
    description="Mountain car (gymnasium classic control), three discrete pushes",
)


@hookimpl
def kernelgym_register_envs():
    """Provide MountainCar-v0."""
    return [SPEC]
