"""Acrobot-v1: gymnasium's classic-control acrobot as a kernelgym env.

Dynamics follow ``gymnasium.envs.classic_control.AcrobotEnv`` with its defaults
("book" dynamics, no torque noise): one RK4 step of ``dt = 0.2`` over the state
``(theta1, theta2, dtheta1, dtheta2)``, angles wrapped to [-pi, pi], velocities bounded
to [-4 pi, 4 pi] and [-9 pi, 9 pi]. Three discrete actions apply torque -1, 0, +1.
Observation ``(cos theta1, sin theta1, cos theta2, sin theta2, dtheta1, dtheta2)``;
reward -1 per step and 0 on the terminal step; terminated when the free end swings
above the bar (``-cos(theta1) - cos(theta1 + theta2) > 1``); truncated after 500
steps. Reset draws all four state values from U(-0.1, 0.1). The state is stored in
float32 and the arithmetic runs in float64 like gymnasium's.
"""

import dataclasses
import math

import numba
import numpy as np
from gymnasium import spaces

from kernelgym.core import device_function, env_kernel, rng
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
TORQUES = (-1.0, 0.0, 1.0)


@dataclasses.dataclass(frozen=True)
class AcrobotParams:
    """The integration time step (gymnasium's ``AcrobotEnv.dt``)."""

    dt: float = 0.2

    def __post_init__(self):
        if not self.dt > 0:
            raise ValueError(f"AcrobotParams dt: expected a value > 0, got {self.dt!r}")


# ------------------------------------------------------------------ physics (one env)
@numba.njit(inline="always")
def _derivatives(theta1, theta2, dtheta1, dtheta2, torque):
    """Time derivative of the state (gymnasium's ``_dsdt``, book dynamics)."""
    m1 = LINK_MASS_1
    m2 = LINK_MASS_2
    l1 = LINK_LENGTH_1
    lc1 = LINK_COM_POS_1
    lc2 = LINK_COM_POS_2
    i1 = LINK_MOI
    i2 = LINK_MOI
    g = GRAVITY
    d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2.0 * l1 * lc2 * math.cos(theta2)) + i1 + i2
    d2 = m2 * (lc2**2 + l1 * lc2 * math.cos(theta2)) + i2
    phi2 = m2 * lc2 * g * math.cos(theta1 + theta2 - math.pi / 2.0)
    phi1 = (
        -m2 * l1 * lc2 * dtheta2**2 * math.sin(theta2)
        - 2.0 * m2 * l1 * lc2 * dtheta2 * dtheta1 * math.sin(theta2)
        + (m1 * lc1 + m2 * l1) * g * math.cos(theta1 - math.pi / 2.0)
        + phi2
    )
    ddtheta2 = (torque + d2 / d1 * phi1 - m2 * l1 * lc2 * dtheta1**2 * math.sin(theta2) - phi2) / (
        m2 * lc2**2 + i2 - d2**2 / d1
    )
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
def acrobot_transition(theta1, theta2, dtheta1, dtheta2, torque, dt):
    """One RK4 step of the acrobot plus gymnasium's wrapping and velocity bounds.

    Returns
    -------
    (theta1, theta2, dtheta1, dtheta2, terminated)
    """
    half = dt / 2.0
    a1, a2, a3, a4 = _derivatives(theta1, theta2, dtheta1, dtheta2, torque)
    b1, b2, b3, b4 = _derivatives(
        theta1 + half * a1, theta2 + half * a2, dtheta1 + half * a3, dtheta2 + half * a4, torque
    )
    c1, c2, c3, c4 = _derivatives(
        theta1 + half * b1, theta2 + half * b2, dtheta1 + half * b3, dtheta2 + half * b4, torque
    )
    e1, e2, e3, e4 = _derivatives(theta1 + dt * c1, theta2 + dt * c2, dtheta1 + dt * c3, dtheta2 + dt * c4, torque)
    theta1 = theta1 + dt / 6.0 * (a1 + 2.0 * b1 + 2.0 * c1 + e1)
    theta2 = theta2 + dt / 6.0 * (a2 + 2.0 * b2 + 2.0 * c2 + e2)
    dtheta1 = dtheta1 + dt / 6.0 * (a3 + 2.0 * b3 + 2.0 * c3 + e3)
    dtheta2 = dtheta2 + dt / 6.0 * (a4 + 2.0 * b4 + 2.0 * c4 + e4)
    theta1 = _wrap(theta1, -math.pi, math.pi)
    theta2 = _wrap(theta2, -math.pi, math.pi)
    dtheta1 = min(max(dtheta1, -MAX_VEL_1), MAX_VEL_1)
    dtheta2 = min(max(dtheta2, -MAX_VEL_2), MAX_VEL_2)
    terminated = -math.cos(theta1) - math.cos(theta2 + theta1) > 1.0
    return theta1, theta2, dtheta1, dtheta2, terminated


@device_function
def _write_observation(i, obs, theta1, theta2, dtheta1, dtheta2):
    obs[i, 0] = math.cos(theta1)
    obs[i, 1] = math.sin(theta1)
    obs[i, 2] = math.cos(theta2)
    obs[i, 3] = math.sin(theta2)
    obs[i, 4] = dtheta1
    obs[i, 5] = dtheta2


@device_function
def _reset_env(i, rng_states, obs, theta1, theta2, dtheta1, dtheta2):
    theta1[i] = rng.uniform_range(rng_states, i, RESET_LOW, RESET_HIGH)
    theta2[i] = rng.uniform_range(rng_states, i, RESET_LOW, RESET_HIGH)
    dtheta1[i] = rng.uniform_range(rng_states, i, RESET_LOW, RESET_HIGH)
    dtheta2[i] = rng.uniform_range(rng_states, i, RESET_LOW, RESET_HIGH)
    _write_observation(
        i, obs, np.float64(theta1[i]), np.float64(theta2[i]), np.float64(dtheta1[i]), np.float64(dtheta2[i])
    )


# ------------------------------------------------------------------------- kernels
@env_kernel
def step_kernel(i, actions, rng_states, reset_mask, obs, rewards, terminated, theta1, theta2, dtheta1, dtheta2, dt):
    """Step env ``i`` (or reset it when its previous step ended the episode)."""
    if reset_mask[i]:
        _reset_env(i, rng_states, obs, theta1, theta2, dtheta1, dtheta2)
        rewards[i] = 0.0
        terminated[i] = False
    else:
        # actions 0, 1, 2 apply torque -1, 0, +1
        torque = np.float64(actions[i] - 1)
        new_theta1, new_theta2, new_dtheta1, new_dtheta2, done = acrobot_transition(
            np.float64(theta1[i]), np.float64(theta2[i]), np.float64(dtheta1[i]), np.float64(dtheta2[i]), torque, dt
        )
        theta1[i] = new_theta1
        theta2[i] = new_theta2
        dtheta1[i] = new_dtheta1
        dtheta2[i] = new_dtheta2
        _write_observation(
            i, obs, np.float64(theta1[i]), np.float64(theta2[i]), np.float64(dtheta1[i]), np.float64(dtheta2[i])
        )
        rewards[i] = 0.0 if done else -1.0
        terminated[i] = done


@env_kernel
def reset_kernel(i, rng_states, reset_mask, obs, theta1, theta2, dtheta1, dtheta2, dt):
    """Draw a fresh start state for env ``i`` when its reset flag is set."""
    if reset_mask[i]:
        _reset_env(i, rng_states, obs, theta1, theta2, dtheta1, dtheta2)


# ---------------------------------------------------------------- CPU reference
STATE_NAMES = ("theta1", "theta2", "dtheta1", "dtheta2")


def reference_reset(params, generator):
    """Single-env reset with a numpy Generator (same distribution as the kernel)."""
    values = generator.uniform(RESET_LOW, RESET_HIGH, size=4).astype(np.float32)
    return {name: values[k].reshape(()) for k, name in enumerate(STATE_NAMES)}


def _reference_derivatives(s, torque):
    m1, m2, l1, lc1, lc2 = LINK_MASS_1, LINK_MASS_2, LINK_LENGTH_1, LINK_COM_POS_1, LINK_COM_POS_2
    i1 = i2 = LINK_MOI
    g = GRAVITY
    theta1, theta2, dtheta1, dtheta2 = s
    d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * np.cos(theta2)) + i1 + i2
    d2 = m2 * (lc2**2 + l1 * lc2 * np.cos(theta2)) + i2
    phi2 = m2 * lc2 * g * np.cos(theta1 + theta2 - np.pi / 2.0)
    phi1 = (
        -m2 * l1 * lc2 * dtheta2**2 * np.sin(theta2)
        - 2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * np.sin(theta2)
        + (m1 * lc1 + m2 * l1) * g * np.cos(theta1 - np.pi / 2)
        + phi2
    )
    ddtheta2 = (torque + d2 / d1 * phi1 - m2 * l1 * lc2 * dtheta1**2 * np.sin(theta2) - phi2) / (
        m2 * lc2**2 + i2 - d2**2 / d1
    )
    ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
    return np.array([dtheta1, dtheta2, ddtheta1, ddtheta2])


def reference_step(params, state, action, generator=None):
    """Single-env step in plain numpy, written after gymnasium's ``AcrobotEnv.step``."""
    s = np.array([float(state[name]) for name in STATE_NAMES])
    torque = TORQUES[int(action)]
    dt = params.dt
    k1 = _reference_derivatives(s, torque)
    k2 = _reference_derivatives(s + dt / 2 * k1, torque)
    k3 = _reference_derivatives(s + dt / 2 * k2, torque)
    k4 = _reference_derivatives(s + dt * k3, torque)
    s = s + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
    for k in (0, 1):
        # whole turns are removed, as gymnasium's `wrap` does
        while s[k] > np.pi:
            s[k] -= 2 * np.pi
        while s[k] < -np.pi:
            s[k] += 2 * np.pi
    s[2] = np.clip(s[2], -MAX_VEL_1, MAX_VEL_1)
    s[3] = np.clip(s[3], -MAX_VEL_2, MAX_VEL_2)
    terminated = bool(-np.cos(s[0]) - np.cos(s[1] + s[0]) > 1.0)
    new_state = {name: np.float32(s[k]).reshape(()) for k, name in enumerate(STATE_NAMES)}
    return new_state, 0.0 if terminated else -1.0, terminated


def reference_observe(params, state):
    """Observation ``(cos t1, sin t1, cos t2, sin t2, dt1, dt2)`` of one env state."""
    theta1, theta2 = float(state["theta1"]), float(state["theta2"])
    return np.array(
        [np.cos(theta1), np.sin(theta1), np.cos(theta2), np.sin(theta2), state["dtheta1"], state["dtheta2"]],
        dtype=np.float32,
    )


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
        {"theta1": floats(math.pi), "theta2": floats(math.pi), "dtheta1": floats(MAX_VEL_1), "dtheta2": floats(MAX_VEL_2)}
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
    state=tuple(StateArray(name, np.float32) for name in STATE_NAMES),
    step_kernel=f"{__name__}:step_kernel",
    reset_kernel=f"{__name__}:reset_kernel",
    reference=f"{__name__}:REFERENCE",
    params=AcrobotParams(),
    max_episode_steps=MAX_EPISODE_STEPS,
    render="kernelgym.envs.render:render_acrobot",
    render_fps=15,
    state_strategy=f"{__name__}:state_strategy",
    invariants=f"{__name__}:check_invariants",
    description="Acrobot swing-up (gymnasium classic control, RK4), three discrete torques",
)


@hookimpl
def kernelgym_register_envs():
    """Provide Acrobot-v1."""
    return [SPEC]
