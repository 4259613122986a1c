"""CartPole-v1 with gymnasium's classic-control dynamics, as a write-once kernel.

The per-env step below is compiled for the cpu backend (``njit(parallel=True)``,
one ``prange`` iteration per env) and for cuda/sim (one thread per env) from this
one source by kernelgym.core's ``@env_kernel``. ``reference`` is the plain
numpy single-env version that the parity tests compare with gymnasium's
``CartPoleEnv`` and with the kernel.

State is stored as float32 (gymnasium keeps float64 and returns float32
observations), so a step matches gymnasium within float32 tolerance.
"""

from __future__ import annotations

import dataclasses
import math

import numba
import numpy as np
from gymnasium import spaces

from kernelgym.core import device_function, env_kernel, rng
from kernelgym.envs.hookspecs import hookimpl
from kernelgym.envs.spec import CPUReference, EnvSpec, StateArray

__all__ = ["CartPoleParams", "SPEC", "reference", "reset", "step"]


@dataclasses.dataclass(frozen=True)
class CartPoleParams:
    """Physical constants and rules of CartPole-v1 (gymnasium's defaults)."""

    gravity: float = 9.8
    masscart: float = 1.0
    masspole: float = 0.1
    length: float = 0.5  # half the pole's length
    force_mag: float = 10.0
    tau: float = 0.02  # seconds between state updates
    semi_implicit_euler: bool = False  # gymnasium's kinematics_integrator != "euler"
    x_threshold: float = 2.4
    theta_threshold_radians: float = 12 * 2 * math.pi / 360
    sutton_barto_reward: bool = False  # reward 0 per step and -1 on termination
    reset_bound: float = 0.05  # start state ~ uniform(-reset_bound, reset_bound) per variable

    def __post_init__(self):
        for name in ("masscart", "masspole", "length", "tau", "x_threshold", "theta_threshold_radians", "reset_bound"):
            value = getattr(self, name)
            if not value > 0:
                raise ValueError(f"CartPoleParams {name}: expected > 0, got {value!r}")


# ------------------------------------------------------------------ kernel (one source)
@numba.njit(inline="always", cache=True)
def _cos_sin(angle):
    """cos and sin of a float64 angle, to double precision.

    While an episode runs the pole angle stays within about 0.21 rad. There a Taylor
    polynomial (Horner form, error below 1e-18 for |angle| <= 0.5) is several times
    cheaper than libm's cos and sin, which took most of a step's time; other angles go
    to libm. Plain multiply-adds also give the simulator the very same bits.
    """
    if -0.5 <= angle <= 0.5:
        a2 = angle * angle
        cos = 1.0 + a2 * (-1.0 / 2.0 + a2 * (1.0 / 24.0 + a2 * (-1.0 / 720.0 + a2 * (
            1.0 / 40320.0 + a2 * (-1.0 / 3628800.0 + a2 * (1.0 / 479001600.0 + a2 * (-1.0 / 87178291200.0)))))))
        sin = angle * (1.0 + a2 * (-1.0 / 6.0 + a2 * (1.0 / 120.0 + a2 * (-1.0 / 5040.0 + a2 * (
            1.0 / 362880.0 + a2 * (-1.0 / 39916800.0 + a2 * (1.0 / 6227020800.0 + a2 * (-1.0 / 1307674368000.0))))))))
        return cos, sin
    return math.cos(angle), math.sin(angle)


@device_function
def _reset_one(i, rng_states, x, x_dot, theta, theta_dot, bound):
    x[i] = rng.uniform_range(rng_states, i, -bound, bound)
    x_dot[i] = rng.uniform_range(rng_states, i, -bound, bound)
    theta[i] = rng.uniform_range(rng_states, i, -bound, bound)
    theta_dot[i] = rng.uniform_range(rng_states, i, -bound, bound)


@device_function
def _observe_one(i, obs, x, x_dot, theta, theta_dot):
    obs[i, 0] = x[i]
    obs[i, 1] = x_dot[i]
    obs[i, 2] = theta[i]
    obs[i, 3] = theta_dot[i]


@env_kernel
def step(i, actions, rng_states, reset_mask, obs, rewards, terminated,
         x, x_dot, theta, theta_dot,
         gravity, masscart, masspole, length, force_mag, tau, semi_implicit_euler,
         x_threshold, theta_threshold_radians, sutton_barto_reward, reset_bound):
    """Advance env ``i`` one step, or reset it when ``reset_mask[i]`` (NEXT_STEP autoreset)."""
    if reset_mask[i]:
        _reset_one(i, rng_states, x, x_dot, theta, theta_dot, reset_bound)
        rewards[i] = 0.0
        terminated[i] = False
    else:
        # One reciprocal instead of four divisions (a division also costs a zero check).
        inverse_total_mass = 1.0 / (masspole + masscart)
        polemass_length = masspole * length
        force = force_mag if actions[i] == 1 else -force_mag
        # np.float64 makes the arithmetic float64 on every backend: numba's float() keeps a
        # float32 a float32, and the simulator's numpy float32 scalars would stay float32.
        position = np.float64(x[i])
        velocity = np.float64(x_dot[i])
        angle = np.float64(theta[i])
        angular_velocity = np.float64(theta_dot[i])
        costheta, sintheta = _cos_sin(angle)
        temp = (force + polemass_length * angular_velocity * angular_velocity * sintheta) * inverse_total_mass
        thetaacc = (gravity * sintheta - costheta * temp) / (
            length * (4.0 / 3.0 - masspole * costheta * costheta * inverse_total_mass)
        )
        xacc = temp - polemass_length * thetaacc * costheta * inverse_total_mass
        if semi_implicit_euler:
            velocity = velocity + tau * xacc
            position = position + tau * velocity
            angular_velocity = angular_velocity + tau * thetaacc
            angle = angle + tau * angular_velocity
        else:
            position = position + tau * velocity
            velocity = velocity + tau * xacc
            angle = angle + tau * angular_velocity
            angular_velocity = angular_velocity + tau * thetaacc
        x[i] = position
        x_dot[i] = velocity
        theta[i] = angle
        theta_dot[i] = angular_velocity
        # Thresholds are checked on the stored (float32) state, as the observation shows it.
        stored_x = np.float64(x[i])
        stored_theta = np.float64(theta[i])
        done = (
            stored_x < -x_threshold or stored_x > x_threshold
            or stored_theta < -theta_threshold_radians or stored_theta > theta_threshold_radians
        )
        terminated[i] = done
        if sutton_barto_reward:
            rewards[i] = -1.0 if done else 0.0
        else:
            rewards[i] = 1.0
    _observe_one(i, obs, x, x_dot, theta, theta_dot)


@env_kernel
def reset(i, rng_states, reset_mask, obs,
          x, x_dot, theta, theta_dot,
          gravity, masscart, masspole, length, force_mag, tau, semi_implicit_euler,
          x_threshold, theta_threshold_radians, sutton_barto_reward, reset_bound):
    """Draw a fresh start state for env ``i`` when ``reset_mask[i]``."""
    if reset_mask[i]:
        _reset_one(i, rng_states, x, x_dot, theta, theta_dot, reset_bound)
        _observe_one(i, obs, x, x_dot, theta, theta_dot)


# ------------------------------------------------------------------ CPU reference
def _reference_reset(params: CartPoleParams, generator: np.random.Generator) -> dict[str, np.ndarray]:
    values = generator.uniform(-params.reset_bound, params.reset_bound, size=4).astype(np.float32)
    return {name: np.float32(value).reshape(()) for name, value in zip(_STATE_NAMES, values)}


def _reference_step(params: CartPoleParams, state, action, generator=None):
    """gymnasium's ``CartPoleEnv.step`` on one env, in float64, rounded to float32 storage."""
    position, velocity, angle, angular_velocity = (float(state[name]) for name in _STATE_NAMES)
    total_mass = params.masspole + params.masscart
    polemass_length = params.masspole * params.length
    force = params.force_mag if int(action) == 1 else -params.force_mag
    costheta, sintheta = math.cos(angle), math.sin(angle)
    temp = (force + polemass_length * angular_velocity**2 * sintheta) / total_mass
    thetaacc = (params.gravity * sintheta - costheta * temp) / (
        params.length * (4.0 / 3.0 - params.masspole * costheta**2 / total_mass)
    )
    xacc = temp - polemass_length * thetaacc * costheta / total_mass
    if params.semi_implicit_euler:
        velocity += params.tau * xacc
        position += params.tau * velocity
        angular_velocity += params.tau * thetaacc
        angle += params.tau * angular_velocity
    else:
        position, velocity = position + params.tau * velocity, velocity + params.tau * xacc
        angle, angular_velocity = angle + params.tau * angular_velocity, angular_velocity + params.tau * thetaacc
    new_state = {
        name: np.float32(value).reshape(())
        for name, value in zip(_STATE_NAMES, (position, velocity, angle, angular_velocity))
    }
    x, theta = float(new_state["x"]), float(new_state["theta"])
    terminated = bool(
        x < -params.x_threshold or x > params.x_threshold
        or theta < -params.theta_threshold_radians or theta > params.theta_threshold_radians
    )
    if params.sutton_barto_reward:
        reward = -1.0 if terminated else 0.0
    else:
        reward = 1.0
    return new_state, reward, terminated


def _reference_observe(params: CartPoleParams, state) -> np.ndarray:
    return np.array([state[name] for name in _STATE_NAMES], dtype=np.float32)


reference = CPUReference(reset=_reference_reset, step=_reference_step, observe=_reference_observe)

_STATE_NAMES = ("x", "x_dot", "theta", "theta_dot")


def _observation_space(params: CartPoleParams) -> spaces.Box:
    high = np.array(
        [params.x_threshold * 2, np.inf, params.theta_threshold_radians * 2, np.inf], dtype=np.float32
    )
    return spaces.Box(-high, high, dtype=np.float32)


def state_strategy(params: CartPoleParams):
    """Hypothesis strategy of single-env CartPole states inside the non-terminal region."""
    from hypothesis import strategies as st

    def inside(limit):
        def to_float32(value):
            stored = np.float32(value)
            if abs(stored) > limit:  # rounding to float32 may step over the threshold
                stored = np.nextafter(stored, np.float32(0))
            return stored.reshape(())

        return st.floats(-limit, limit).map(to_float32)

    return st.fixed_dictionaries({
        "x": inside(params.x_threshold),
        "x_dot": inside(3.0),
        "theta": inside(params.theta_threshold_radians),
        "theta_dot": inside(3.0),
    })


SPEC = EnvSpec(
    id="CartPole-v1",
    observation_space=_observation_space,
    action_space=spaces.Discrete(2),
    state=tuple(StateArray(name, np.float32) for name in _STATE_NAMES),
    step_kernel="kernelgym.envs.classic.cartpole:step",
    reset_kernel="kernelgym.envs.classic.cartpole:reset",
    reference="kernelgym.envs.classic.cartpole:reference",
    params=CartPoleParams(),
    max_episode_steps=500,
    render="kernelgym.envs.render:render_cartpole",
    render_fps=50,
    state_strategy="kernelgym.envs.classic.cartpole:state_strategy",
    description="Balance a pole on a cart (gymnasium CartPole-v1 dynamics).",
)


@hookimpl
def kernelgym_register_envs():
    return [SPEC]
