"""MountainCar-v0: gymnasium's classic-control mountain car as a kernelgym env.

Dynamics, reward and termination follow ``gymnasium.envs.classic_control.MountainCarEnv``:
state and observation ``(position, velocity)``, three discrete actions (push left,
no push, push right), reward -1 per step, terminated when the car reaches the flag
(``position >= goal_position`` and ``velocity >= goal_velocity``), truncated after 200
steps. Reset draws the position from U(-0.6, -0.4) with zero velocity. The state is
stored in float32; the arithmetic runs in float64 like gymnasium's (the default
precision) or in float32 with ``make(..., precision="float32")``: the physics takes
``real``, the scalar type, and casts every input and constant with it.
"""

import dataclasses

import numba
import numpy as np
from gymnasium import spaces

from kernelgym.core import device_function, env_kernel, rng
from kernelgym.core.portable_math import cos_as
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
def mountain_car_transition(position, velocity, action, force, gravity, goal_position, goal_velocity, real):
    """One MountainCar step for one env, every float argument and the arithmetic of type ``real``.

    Returns
    -------
    (new_position, new_velocity, terminated)
    """
    velocity += real(action - 1) * force + cos_as(real(3.0) * position, real) * (-gravity)
    velocity = min(max(velocity, -real(MAX_SPEED)), real(MAX_SPEED))
    position += velocity
    position = min(max(position, real(MIN_POSITION)), real(MAX_POSITION))
    # the left wall is inelastic: the car stops there
    if position == real(MIN_POSITION) and velocity < real(0.0):
        velocity = real(0.0)
    terminated = position >= goal_position and velocity >= goal_velocity
    return position, velocity, terminated


@device_function
def _observe(i, obs, position, velocity):
    obs[i, 0] = position[i]
    obs[i, 1] = velocity[i]


# ------------------------------------------------------------------------- kernels
@env_kernel
def step_kernel(
    i, actions, obs, rewards, terminated, position, velocity, force, gravity, goal_position, goal_velocity, real
):
    """Step env ``i`` (the float params are bound as ``real`` scalars)."""
    position[i], velocity[i], terminated[i] = mountain_car_transition(
        real(position[i]), real(velocity[i]), actions[i], force, gravity, goal_position, goal_velocity, real
    )
    rewards[i] = -1.0
    _observe(i, obs, position, velocity)


@env_kernel
def reset_kernel(i, rng_states, obs, position, velocity, real):
    """Draw env ``i``'s start: position uniform in [-0.6, -0.4), velocity 0."""
    position[i] = rng.uniform_range_as(rng_states, i, real(RESET_LOW), real(RESET_HIGH), real)
    velocity[i] = 0.0
    _observe(i, obs, position, velocity)


# ---------------------------------------------------------------- exact reference
def reference_reset(params, rng_states, real=np.float64):
    """Single-env reset from the env's own stream (the kernel's draw)."""
    return {
        "position": np.float32(rng.uniform_range_as(rng_states, 0, real(RESET_LOW), real(RESET_HIGH), real)).reshape(
            ()
        ),
        "velocity": np.float32(0.0).reshape(()),
    }


def reference_step(params, state, action, rng_states=None, real=np.float64):
    """Single-env step: the kernel's `mountain_car_transition` in ``real``, on float32 storage."""
    p = params
    position, velocity, terminated = mountain_car_transition(
        real(state["position"]),
        real(state["velocity"]),
        np.int64(action),
        real(p.force),
        real(p.gravity),
        real(p.goal_position),
        real(p.goal_velocity),
        real,
    )
    new_state = {"position": np.float32(position).reshape(()), "velocity": np.float32(velocity).reshape(())}
    return new_state, -1.0, bool(terminated)


def reference_observe(params, state, real=np.float64):
    """Observation ``(position, velocity)`` of one env state (the stored state, in either precision)."""
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
    state=(
        StateArray("position", np.float32, low=MIN_POSITION, high=MAX_POSITION),
        StateArray("velocity", np.float32, low=-MAX_SPEED, high=MAX_SPEED),
    ),
    step_kernel=step_kernel,
    reset_kernel=reset_kernel,
    reference=REFERENCE,
    params=MountainCarParams(),
    max_episode_steps=MAX_EPISODE_STEPS,
    render="kernelgym.envs.render:render_mountain_car",
    render_fps=30,
    state_strategy=state_strategy,
    invariants=check_invariants,
    # the float physics params may differ per env (not the bounds the spaces are built from)
    per_env_params=("force", "gravity"),
    precisions=("float64", "float32"),
    description="Mountain car (gymnasium classic control), three discrete pushes",
)


@hookimpl
def kernelgym_register_envs():
    """Provide MountainCar-v0."""
    return [SPEC]
