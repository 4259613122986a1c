"""Acrobot-v1: gymnasium's classic-control acrobot as a kernelgym env.

Dynamics follow ``gymnasium.envs.classic_control.AcrobotEnv`` with its defaults
("book" dynamics, no torque noise): one RK4 step of ``dt = 0.2`` over the state
``(theta1, theta2, dtheta1, dtheta2)``, angles wrapped to [-pi, pi], velocities bounded
to [-4 pi, 4 pi] and [-9 pi, 9 pi]. Three discrete actions apply torque -1, 0, +1.
Observation ``(cos theta1, sin theta1, cos theta2, sin theta2, dtheta1, dtheta2)``;
reward -1 per step and 0 on the terminal step; terminated when the free end swings
above the bar (``-cos(theta1) - cos(theta1 + theta2) > 1``); truncated after 500
steps. Reset draws all four state values from U(-0.1, 0.1). The state is stored in
float32 and the arithmetic runs in float64 like gymnasium's (the default precision) or
in float32 with ``make(..., precision="float32")``: the physics takes ``real``, the
scalar type, and casts every input and constant with it.
"""

import dataclasses
import math

import numba
import numpy as np
from gymnasium import spaces

from kernelgym.core import device_function, env_kernel, rng
from kernelgym.core.portable_math import cos_as, sincos_as
from kernelgym.envs.hookspecs import hookimpl
from kernelgym.envs.spec import CPUReference, EnvSpec, StateArray

LINK_LENGTH_1 = 1.0
LINK_MASS_1 = 1.0
LINK_MASS_2 = 1.0
LINK_COM_POS_1 = 0.5
LINK_COM_POS_2 = 0.5
LINK_MOI = 1.0
GRAVITY = 9.8
MAX_VEL_1 = 4.0 * math.pi
MAX_VEL_2 = 9.0 * math.pi
MAX_EPISODE_STEPS = 500
RESET_LOW = -0.1
RESET_HIGH = 0.1


@dataclasses.dataclass(frozen=True)
class AcrobotParams:
    """The integration time step (gymnasium's ``AcrobotEnv.dt``)."""

    dt: float = 0.2

    def __post_init__(self):
        if not self.dt > 0:
            raise ValueError(f"AcrobotParams dt: expected a value > 0, got {self.dt!r}")


# ------------------------------------------------------------------ physics (one env)
@numba.njit(inline="always")
def _derivatives(theta1, theta2, dtheta1, dtheta2, torque, real):
    """Time derivative of the state (gymnasium's ``_dsdt``, book dynamics), in ``real``."""
    m1 = real(LINK_MASS_1)
    m2 = real(LINK_MASS_2)
    l1 = real(LINK_LENGTH_1)
    lc1 = real(LINK_COM_POS_1)
    lc2 = real(LINK_COM_POS_2)
    i1 = real(LINK_MOI)
    i2 = real(LINK_MOI)
    g = real(GRAVITY)
    # each angle's sin and cos once (the same call gives the same bits as separate sin_as and
    # cos_as calls): 3 calls per derivative instead of 7
    sin2, cos2 = sincos_as(theta2, real)
    d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + real(2.0) * l1 * lc2 * cos2) + i1 + i2
    d2 = m2 * (lc2**2 + l1 * lc2 * cos2) + i2
    phi2 = m2 * lc2 * g * cos_as(theta1 + theta2 - real(math.pi / 2.0), real)
    phi1 = (
        -m2 * l1 * lc2 * dtheta2**2 * sin2
        - real(2.0) * m2 * l1 * lc2 * dtheta2 * dtheta1 * sin2
        + (m1 * lc1 + m2 * l1) * g * cos_as(theta1 - real(math.pi / 2.0), real)
        + phi2
    )
    ddtheta2 = (torque + d2 / d1 * phi1 - m2 * l1 * lc2 * dtheta1**2 * sin2 - phi2) / (m2 * lc2**2 + i2 - d2**2 / d1)
    ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
    return dtheta1, dtheta2, ddtheta1, ddtheta2


@numba.njit(inline="always")
def _wrap(angle, low, high):
    # gymnasium's `wrap`: shift by whole periods until inside [low, high]
    period = high - low
    while angle > high:
        angle = angle - period
    while angle < low:
        angle = angle + period
    return angle


@numba.njit(inline="always")
def acrobot_transition(theta1, theta2, dtheta1, dtheta2, torque, dt, real):
    """One RK4 step of the acrobot plus gymnasium's wrapping and velocity bounds.

    Every float argument and the arithmetic are of type ``real``.

    Returns
    -------
    (theta1, theta2, dtheta1, dtheta2, terminated)
    """
    half = dt / real(2.0)
    a1, a2, a3, a4 = _derivatives(theta1, theta2, dtheta1, dtheta2, torque, real)
    b1, b2, b3, b4 = _derivatives(
        theta1 + half * a1, theta2 + half * a2, dtheta1 + half * a3, dtheta2 + half * a4, torque, real
    )
    c1, c2, c3, c4 = _derivatives(
        theta1 + half * b1, theta2 + half * b2, dtheta1 + half * b3, dtheta2 + half * b4, torque, real
    )
    e1, e2, e3, e4 = _derivatives(
        theta1 + dt * c1, theta2 + dt * c2, dtheta1 + dt * c3, dtheta2 + dt * c4, torque, real
    )
    two, sixth = real(2.0), dt / real(6.0)
    theta1 = theta1 + sixth * (a1 + two * b1 + two * c1 + e1)
    theta2 = theta2 + sixth * (a2 + two * b2 + two * c2 + e2)
    dtheta1 = dtheta1 + sixth * (a3 + two * b3 + two * c3 + e3)
    dtheta2 = dtheta2 + sixth * (a4 + two * b4 + two * c4 + e4)
    theta1 = _wrap(theta1, -real(math.pi), real(math.pi))
    theta2 = _wrap(theta2, -real(math.pi), real(math.pi))
    dtheta1 = min(max(dtheta1, -real(MAX_VEL_1)), real(MAX_VEL_1))
    dtheta2 = min(max(dtheta2, -real(MAX_VEL_2)), real(MAX_VEL_2))
    terminated = -cos_as(theta1, real) - cos_as(theta2 + theta1, real) > real(1.0)
    return theta1, theta2, dtheta1, dtheta2, terminated


@numba.njit(inline="always")
def observation(theta1, theta2, dtheta1, dtheta2, real):
    """``(cos t1, sin t1, cos t2, sin t2, dt1, dt2)`` of a stored state, in the type of its arguments."""
    sin1, cos1 = sincos_as(theta1, real)
    sin2, cos2 = sincos_as(theta2, real)
    return cos1, sin1, cos2, sin2, dtheta1, dtheta2


@device_function
def _observe(i, obs, theta1, theta2, dtheta1, dtheta2, real):
    # computed from the stored (float32) state, after a step and after a reset alike
    values = observation(real(theta1[i]), real(theta2[i]), real(dtheta1[i]), real(dtheta2[i]), real)
    for k in range(6):
        obs[i, k] = values[k]


# ------------------------------------------------------------------------- kernels
@env_kernel
def step_kernel(i, actions, obs, rewards, terminated, theta1, theta2, dtheta1, dtheta2, dt, real):
    """Step env ``i``: actions 0, 1, 2 apply torque -1, 0, +1 (``dt`` is bound as a ``real`` scalar)."""
    theta1[i], theta2[i], dtheta1[i], dtheta2[i], done = acrobot_transition(
        real(theta1[i]), real(theta2[i]), real(dtheta1[i]), real(dtheta2[i]), real(actions[i] - 1), dt, real
    )
    rewards[i] = 0.0 if done else -1.0
    terminated[i] = done
    _observe(i, obs, theta1, theta2, dtheta1, dtheta2, real)


@env_kernel
def reset_kernel(i, rng_states, obs, theta1, theta2, dtheta1, dtheta2, real):
    """Draw env ``i``'s start: every variable uniform in [-0.1, 0.1)."""
    low, high = real(RESET_LOW), real(RESET_HIGH)
    theta1[i] = rng.uniform_range_as(rng_states, i, low, high, real)
    theta2[i] = rng.uniform_range_as(rng_states, i, low, high, real)
    dtheta1[i] = rng.uniform_range_as(rng_states, i, low, high, real)
    dtheta2[i] = rng.uniform_range_as(rng_states, i, low, high, real)
    _observe(i, obs, theta1, theta2, dtheta1, dtheta2, real)


# ---------------------------------------------------------------- exact reference
STATE_NAMES = ("theta1", "theta2", "dtheta1", "dtheta2")


def reference_reset(params, rng_states, real=np.float64):
    """Single-env reset from the env's own stream (the kernel's draws, in its order)."""
    low, high = real(RESET_LOW), real(RESET_HIGH)
    return {name: np.float32(rng.uniform_range_as(rng_states, 0, low, high, real)).reshape(()) for name in STATE_NAMES}


def reference_step(params, state, action, rng_states=None, real=np.float64):
    """Single-env step: the kernel's `acrobot_transition` (RK4) in ``real``, on float32 storage."""
    *values, terminated = acrobot_transition(
        *(real(state[name]) for name in STATE_NAMES), real(int(action) - 1), real(params.dt), real
    )
    new_state = {name: np.float32(value).reshape(()) for name, value in zip(STATE_NAMES, values)}
    return new_state, 0.0 if terminated else -1.0, bool(terminated)


def reference_observe(params, state, real=np.float64):
    """Observation ``(cos t1, sin t1, cos t2, sin t2, dt1, dt2)`` of one env state, computed in ``real``."""
    return np.array(observation(*(real(state[name]) for name in STATE_NAMES), real), dtype=np.float32)


REFERENCE = CPUReference(reset=reference_reset, step=reference_step, observe=reference_observe)


def state_strategy(params):
    """Hypothesis strategy of single-env states inside the angle and speed bounds."""
    from hypothesis import strategies as st

    def floats(bound):
        # the largest float32 that does not exceed the bound, so states stay inside it
        bound = np.float32(bound)
        bound = float(bound if bound <= bound.astype(np.float64) else np.nextafter(bound, np.float32(0)))
        return st.floats(-bound, bound, width=32).map(lambda value: np.float32(value).reshape(()))

    return st.fixed_dictionaries(
        {
            "theta1": floats(math.pi),
            "theta2": floats(math.pi),
            "dtheta1": floats(MAX_VEL_1),
            "dtheta2": floats(MAX_VEL_2),
        }
    )


def check_invariants(params, state):
    """Angles stay in [-pi, pi] and velocities inside their bounds (in float32)."""
    for name, bound in (("theta1", np.pi), ("theta2", np.pi), ("dtheta1", MAX_VEL_1), ("dtheta2", MAX_VEL_2)):
        value = np.float32(state[name])
        assert abs(value) <= np.float32(bound), f"{name} {value} outside [-{bound}, {bound}]"


def _observation_space(params):
    high = np.array([1.0, 1.0, 1.0, 1.0, MAX_VEL_1, MAX_VEL_2], dtype=np.float32)
    return spaces.Box(low=-high, high=high, dtype=np.float32)


SPEC = EnvSpec(
    id="Acrobot-v1",
    observation_space=_observation_space,
    action_space=spaces.Discrete(3),
    state=tuple(
        StateArray(name, np.float32, low=-bound, high=bound)
        for name, bound in zip(STATE_NAMES, (np.pi, np.pi, MAX_VEL_1, MAX_VEL_2), strict=True)
    ),
    step_kernel=step_kernel,
    reset_kernel=reset_kernel,
    reference=REFERENCE,
    params=AcrobotParams(),
    max_episode_steps=MAX_EPISODE_STEPS,
    render="kernelgym.envs.render:render_acrobot",
    render_fps=15,
    state_strategy=state_strategy,
    invariants=check_invariants,
    # the float physics params may differ per env (not the bounds the spaces are built from)
    per_env_params=("dt",),
    precisions=("float64", "float32"),
    description="Acrobot swing-up (gymnasium classic control, RK4), three discrete torques",
)


@hookimpl
def kernelgym_register_envs():
    """Provide Acrobot-v1."""
    return [SPEC]
