"""Pendulum-v1: gymnasium's classic-control pendulum swing-up as a kernelgym env.

Dynamics, reward and observation follow ``gymnasium.envs.classic_control.PendulumEnv``:
state ``(theta, theta_dot)``, observation ``(cos theta, sin theta, theta_dot)``,
reward ``-(angle_normalize(theta)**2 + 0.1 * theta_dot**2 + 0.001 * torque**2)``.
The episode never terminates; it is truncated after 200 steps. Reset draws theta
from U(-pi, pi) and theta_dot from U(-1, 1).

Actions are a continuous torque of shape ``(1,)``. A torque outside
``[-max_torque, max_torque]`` (default ``[-2, 2]``) is clipped to that range before it
is used, as gymnasium does. The state is stored in float32; the arithmetic runs in
float64 like gymnasium's (the default precision), so one step matches gymnasium within
float32 rounding, or in float32 with ``make(..., precision="float32")``: the physics
takes ``real``, the scalar type, and casts every input and constant with it.
"""

import dataclasses
import math

import numba
import numpy as np
from gymnasium import spaces

from kernelgym.core import device_function, env_kernel, rng
from kernelgym.core.portable_math import sin_as, sincos_as
from kernelgym.envs.hookspecs import hookimpl
from kernelgym.envs.spec import CPUReference, EnvSpec, StateArray

MAX_EPISODE_STEPS = 200
RESET_HIGH_THETA = math.pi
RESET_HIGH_THETA_DOT = 1.0


@dataclasses.dataclass(frozen=True)
class PendulumParams:
    """Physical constants (gymnasium's defaults); ``make(..., gravity=9.81)`` overrides."""

    max_speed: float = 8.0
    max_torque: float = 2.0
    dt: float = 0.05
    gravity: float = 10.0
    mass: float = 1.0
    length: float = 1.0

    def __post_init__(self):
        for name in ("max_speed", "max_torque", "dt", "mass", "length"):
            value = getattr(self, name)
            if not value > 0:
                raise ValueError(f"PendulumParams {name}: expected a value > 0, got {value!r}")


# ------------------------------------------------------------------ physics (one env)
@numba.njit(inline="always")
def angle_normalize(angle, real):
    """Map an angle of type ``real`` to [-pi, pi) as gymnasium's ``angle_normalize`` does."""
    return ((angle + real(math.pi)) % real(2.0 * math.pi)) - real(math.pi)


@numba.njit(inline="always")
def pendulum_transition(theta, theta_dot, torque, max_speed, max_torque, dt, gravity, mass, length, real):
    """One Pendulum step for one env, every float argument and the arithmetic of type ``real``.

    Returns
    -------
    (new_theta, new_theta_dot, reward)
    """
    torque = min(max(torque, -max_torque), max_torque)
    cost = angle_normalize(theta, real) ** 2 + real(0.1) * theta_dot**2 + real(0.001) * torque**2
    new_theta_dot = (
        theta_dot
        + (real(3.0) * gravity / (real(2.0) * length) * sin_as(theta, real) + real(3.0) / (mass * length**2) * torque)
        * dt
    )
    new_theta_dot = min(max(new_theta_dot, -max_speed), max_speed)
    new_theta = theta + new_theta_dot * dt
    return new_theta, new_theta_dot, -cost


@numba.njit(inline="always")
def observation(theta, theta_dot, real):
    """``(cos theta, sin theta, theta_dot)`` of a stored state, in the type of its arguments."""
    sin_theta, cos_theta = sincos_as(theta, real)
    return cos_theta, sin_theta, theta_dot


@device_function
def _observe(i, obs, theta, theta_dot, real):
    # computed from the stored (float32) state, after a step and after a reset alike
    obs[i, 0], obs[i, 1], obs[i, 2] = observation(real(theta[i]), real(theta_dot[i]), real)


# ------------------------------------------------------------------------- kernels
@env_kernel
def step_kernel(
    i, actions, obs, rewards, terminated, theta, theta_dot, max_speed, max_torque, dt, gravity, mass, length, real
):
    """Step env ``i`` (the float params are bound as ``real`` scalars)."""
    theta[i], theta_dot[i], rewards[i] = pendulum_transition(
        real(theta[i]),
        real(theta_dot[i]),
        real(actions[i, 0]),
        max_speed,
        max_torque,
        dt,
        gravity,
        mass,
        length,
        real,
    )
    _observe(i, obs, theta, theta_dot, real)
    # the pendulum never terminates: only the time limit (the runtime's) ends an episode
    terminated[i] = False


@env_kernel
def reset_kernel(i, rng_states, obs, theta, theta_dot, real):
    """Draw env ``i``'s start state: theta in [-pi, pi), theta_dot in [-1, 1)."""
    high_theta, high_theta_dot = real(RESET_HIGH_THETA), real(RESET_HIGH_THETA_DOT)
    theta[i] = rng.uniform_range_as(rng_states, i, -high_theta, high_theta, real)
    theta_dot[i] = rng.uniform_range_as(rng_states, i, -high_theta_dot, high_theta_dot, real)
    _observe(i, obs, theta, theta_dot, real)


# ---------------------------------------------------------------- exact reference
def reference_reset(params, rng_states, real=np.float64):
    """Single-env reset from the env's own stream (the kernel's draws, in its order)."""
    high_theta, high_theta_dot = real(RESET_HIGH_THETA), real(RESET_HIGH_THETA_DOT)
    theta = rng.uniform_range_as(rng_states, 0, -high_theta, high_theta, real)
    theta_dot = rng.uniform_range_as(rng_states, 0, -high_theta_dot, high_theta_dot, real)
    return {"theta": np.float32(theta).reshape(()), "theta_dot": np.float32(theta_dot).reshape(())}


def reference_step(params, state, action, rng_states=None, real=np.float64):
    """Single-env step: the kernel's `pendulum_transition` in ``real``, on float32 storage."""
    p = params
    torque = real(np.asarray(action, dtype=np.float32).reshape(-1)[0])
    theta, theta_dot, reward = pendulum_transition(
        real(state["theta"]),
        real(state["theta_dot"]),
        torque,
        *(real(value) for value in (p.max_speed, p.max_torque, p.dt, p.gravity, p.mass, p.length)),
        real,
    )
    new_state = {"theta": np.float32(theta).reshape(()), "theta_dot": np.float32(theta_dot).reshape(())}
    return new_state, reward, False


def reference_observe(params, state, real=np.float64):
    """Observation ``(cos theta, sin theta, theta_dot)`` of one env state, computed in ``real``."""
    return np.array(observation(real(state["theta"]), real(state["theta_dot"]), real), dtype=np.float32)


REFERENCE = CPUReference(reset=reference_reset, step=reference_step, observe=reference_observe)


def state_strategy(params):
    """Hypothesis strategy of single-env states: any angle in [-4 pi, 4 pi], any speed."""
    from hypothesis import strategies as st

    def floats(bound):
        bound = float(np.float32(bound))  # hypothesis wants bounds that float32 represents
        return st.floats(-bound, bound, width=32).map(lambda value: np.float32(value).reshape(()))

    return st.fixed_dictionaries({"theta": floats(4 * math.pi), "theta_dot": floats(params.max_speed)})


def check_invariants(params, state):
    """The angular speed stays within ``[-max_speed, max_speed]``."""
    theta_dot = float(state["theta_dot"])
    assert abs(theta_dot) <= params.max_speed, (
        f"theta_dot {theta_dot} outside [-{params.max_speed}, {params.max_speed}]"
    )
    assert math.isfinite(float(state["theta"])), f"theta {state['theta']} is not finite"


def _observation_space(params):
    high = np.array([1.0, 1.0, params.max_speed], dtype=np.float32)
    return spaces.Box(low=-high, high=high, dtype=np.float32)


def _action_space(params):
    return spaces.Box(low=-params.max_torque, high=params.max_torque, shape=(1,), dtype=np.float32)


SPEC = EnvSpec(
    id="Pendulum-v1",
    observation_space=_observation_space,
    action_space=_action_space,
    state=(
        # any finite angle (observations take its cos and sin)
        StateArray("theta", np.float32, low=-np.finfo(np.float32).max, high=np.finfo(np.float32).max),
        StateArray("theta_dot", np.float32, low=lambda params: -params.max_speed, high=lambda params: params.max_speed),
    ),
    step_kernel=step_kernel,
    reset_kernel=reset_kernel,
    reference=REFERENCE,
    params=PendulumParams(),
    max_episode_steps=MAX_EPISODE_STEPS,
    render="kernelgym.envs.render:render_pendulum",
    render_fps=30,
    state_strategy=state_strategy,
    invariants=check_invariants,
    # the float physics params may differ per env (not the bounds the spaces are built from)
    per_env_params=("dt", "gravity", "mass", "length"),
    precisions=("float64", "float32"),
    description="Pendulum swing-up (gymnasium classic control), continuous torque clipped to [-2, 2]",
)


@hookimpl
def kernelgym_register_envs():
    """Provide Pendulum-v1."""
    return [SPEC]
