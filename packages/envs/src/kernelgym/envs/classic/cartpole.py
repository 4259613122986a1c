"""CartPole-v1 with gymnasium's classic-control dynamics, as a write-once kernel.

The per-env step below is compiled for the cpu backend (``njit(parallel=True)``,
one ``prange`` iteration per env) and for cuda/sim (one thread per env) from this
one source by kernelgym.core's ``@env_kernel``. The physics is written once, in
`dynamics` and `outcome`: the kernel and ``reference`` (the plain single-env model,
drawing from the env's own ``kernelgym.core.rng`` stream) both call them, so they agree
bit for bit; the gymnasium tests compare them with gymnasium's ``CartPoleEnv``.

State is stored as float32 (gymnasium keeps float64 and returns float32
observations), so a step matches gymnasium within float32 tolerance. The arithmetic
runs in the env's precision (``make(..., precision="float64")``, the default, like
gymnasium's, or ``"float32"``): the physics takes ``real``, the scalar type, and casts
every input and constant with it.
"""

from __future__ import annotations

import dataclasses
import math

import numba
import numpy as np
from gymnasium import spaces

from kernelgym.core import device_function, env_kernel, rng
from kernelgym.core.portable_math import sincos_as
from kernelgym.envs.hookspecs import hookimpl
from kernelgym.envs.spec import CPUReference, EnvSpec, StateArray

__all__ = ["CartPoleParams", "SPEC", "dynamics", "outcome", "reference", "reset", "step"]


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
def _cos_sin(angle, real):
    """cos and sin of an angle of type ``real``, to that precision.

    While an episode runs the pole angle stays within about 0.21 rad. There a Taylor
    polynomial (Horner form, error below 1e-18 for |angle| <= 0.5) is several times
    cheaper than libm's cos and sin, which took most of a step's time; other angles go
    to `kernelgym.core.portable_math` (libm's would differ from libdevice's on a GPU). Plain
    multiply-adds also give the simulator the very same bits.
    """
    if real(-0.5) <= angle <= real(0.5):
        a2 = angle * angle
        cos = real(1.0) + a2 * (
            real(-1.0 / 2.0)
            + a2
            * (
                real(1.0 / 24.0)
                + a2
                * (
                    real(-1.0 / 720.0)
                    + a2
                    * (
                        real(1.0 / 40320.0)
                        + a2
                        * (real(-1.0 / 3628800.0) + a2 * (real(1.0 / 479001600.0) + a2 * (real(-1.0 / 87178291200.0))))
                    )
                )
            )
        )
        sin = angle * (
            real(1.0)
            + a2
            * (
                real(-1.0 / 6.0)
                + a2
                * (
                    real(1.0 / 120.0)
                    + a2
                    * (
                        real(-1.0 / 5040.0)
                        + a2
                        * (
                            real(1.0 / 362880.0)
                            + a2
                            * (
                                real(-1.0 / 39916800.0)
                                + a2 * (real(1.0 / 6227020800.0) + a2 * (real(-1.0 / 1307674368000.0)))
                            )
                        )
                    )
                )
            )
        )
        return cos, sin
    sin, cos = sincos_as(angle, real)
    return cos, sin


@numba.njit(inline="always", cache=True)
def dynamics(
    x,
    x_dot,
    theta,
    theta_dot,
    push_right,
    gravity,
    masscart,
    masspole,
    length,
    force_mag,
    tau,
    semi_implicit_euler,
    real,
):
    """gymnasium's CartPole physics for one env: the new (x, x_dot, theta, theta_dot).

    The one copy of the physics: the kernel and the reference both call it, with every
    float argument of type ``real`` (``numpy.float64`` or ``numpy.float32``), which the
    arithmetic then runs in.
    """
    # One reciprocal instead of four divisions (a division also costs a zero check).
    inverse_total_mass = real(1.0) / (masspole + masscart)
    polemass_length = masspole * length
    force = force_mag if push_right else -force_mag
    costheta, sintheta = _cos_sin(theta, real)
    temp = (force + polemass_length * theta_dot * theta_dot * sintheta) * inverse_total_mass
    thetaacc = (gravity * sintheta - costheta * temp) / (
        length * (real(4.0 / 3.0) - masspole * costheta * costheta * inverse_total_mass)
    )
    xacc = temp - polemass_length * thetaacc * costheta * inverse_total_mass
    if semi_implicit_euler:
        x_dot = x_dot + tau * xacc
        x = x + tau * x_dot
        theta_dot = theta_dot + tau * thetaacc
        theta = theta + tau * theta_dot
    else:
        x, x_dot = x + tau * x_dot, x_dot + tau * xacc
        theta, theta_dot = theta + tau * theta_dot, theta_dot + tau * thetaacc
    return x, x_dot, theta, theta_dot


@numba.njit(inline="always", cache=True)
def outcome(x, theta, x_threshold, theta_threshold_radians, sutton_barto_reward):
    """(terminated, reward) of a stored (float32) state, as the observation shows it (compared in
    the type of ``x`` and the thresholds)."""
    done = x < -x_threshold or x > x_threshold or theta < -theta_threshold_radians or theta > theta_threshold_radians
    if sutton_barto_reward:
        return done, -1.0 if done else 0.0
    return done, 1.0


@env_kernel
def step(
    i,
    actions,
    obs,
    rewards,
    terminated,
    x,
    x_dot,
    theta,
    theta_dot,
    gravity,
    masscart,
    masspole,
    length,
    force_mag,
    tau,
    semi_implicit_euler,
    x_threshold,
    theta_threshold_radians,
    sutton_barto_reward,
    real,
):
    """Advance env ``i`` one step."""
    # real() makes the arithmetic the env's precision on every backend (the float params
    # are bound as real scalars): numba's float() keeps a float32 a float32, and the
    # simulator's numpy float32 scalars would stay float32.
    x[i], x_dot[i], theta[i], theta_dot[i] = dynamics(
        real(x[i]),
        real(x_dot[i]),
        real(theta[i]),
        real(theta_dot[i]),
        actions[i] == 1,
        gravity,
        masscart,
        masspole,
        length,
        force_mag,
        tau,
        semi_implicit_euler,
        real,
    )
    terminated[i], rewards[i] = outcome(
        real(x[i]), real(theta[i]), x_threshold, theta_threshold_radians, sutton_barto_reward
    )
    _observe(i, obs, x, x_dot, theta, theta_dot)


@env_kernel
def reset(i, rng_states, obs, x, x_dot, theta, theta_dot, reset_bound, real):
    """Draw env ``i``'s start state: each variable uniform in [-reset_bound, reset_bound)."""
    x[i] = rng.uniform_range_as(rng_states, i, -reset_bound, reset_bound, real)
    x_dot[i] = rng.uniform_range_as(rng_states, i, -reset_bound, reset_bound, real)
    theta[i] = rng.uniform_range_as(rng_states, i, -reset_bound, reset_bound, real)
    theta_dot[i] = rng.uniform_range_as(rng_states, i, -reset_bound, reset_bound, real)
    _observe(i, obs, x, x_dot, theta, theta_dot)


@device_function
def _observe(i, obs, x, x_dot, theta, theta_dot):
    obs[i, 0] = x[i]
    obs[i, 1] = x_dot[i]
    obs[i, 2] = theta[i]
    obs[i, 3] = theta_dot[i]


# ------------------------------------------------------------------ exact reference
def _reference_reset(params: CartPoleParams, rng_states, real=np.float64) -> dict[str, np.ndarray]:
    bound = real(params.reset_bound)
    return {
        name: np.float32(rng.uniform_range_as(rng_states, 0, -bound, bound, real)).reshape(()) for name in _STATE_NAMES
    }


def _reference_step(params: CartPoleParams, state, action, rng_states=None, real=np.float64):
    """One env's step: the kernel's physics (`dynamics`, `outcome`) in ``real``, on float32 storage."""
    p = params
    new = dynamics(
        *(real(state[name]) for name in _STATE_NAMES),
        int(action) == 1,
        real(p.gravity),
        real(p.masscart),
        real(p.masspole),
        real(p.length),
        real(p.force_mag),
        real(p.tau),
        p.semi_implicit_euler,
        real,
    )
    new_state = {name: np.float32(value).reshape(()) for name, value in zip(_STATE_NAMES, new)}
    terminated, reward = outcome(
        real(new_state["x"]),
        real(new_state["theta"]),
        real(p.x_threshold),
        real(p.theta_threshold_radians),
        p.sutton_barto_reward,
    )
    return new_state, reward, bool(terminated)


def _reference_observe(params: CartPoleParams, state, real=np.float64) -> np.ndarray:
    # the observation is the stored state itself, in either precision
    return np.array([state[name] for name in _STATE_NAMES], dtype=np.float32)


reference = CPUReference(reset=_reference_reset, step=_reference_step, observe=_reference_observe)

_STATE_NAMES = ("x", "x_dot", "theta", "theta_dot")


def _observation_space(params: CartPoleParams) -> spaces.Box:
    high = np.array([params.x_threshold * 2, np.inf, params.theta_threshold_radians * 2, np.inf], dtype=np.float32)
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

    return st.fixed_dictionaries(
        {
            "x": inside(params.x_threshold),
            "x_dot": inside(3.0),
            "theta": inside(params.theta_threshold_radians),
            "theta_dot": inside(3.0),
        }
    )


SPEC = EnvSpec(
    id="CartPole-v1",
    observation_space=_observation_space,
    action_space=spaces.Discrete(2),
    # no state value indexes anything: any float is a state the physics can step
    state=tuple(StateArray(name, np.float32, low=-np.inf, high=np.inf) for name in _STATE_NAMES),
    step_kernel=step,
    reset_kernel=reset,
    reference=reference,
    params=CartPoleParams(),
    max_episode_steps=500,
    render="kernelgym.envs.render:render_cartpole",
    render_fps=50,
    state_strategy=state_strategy,
    # the float physics params may differ per env (not the bounds the spaces are built from)
    per_env_params=("gravity", "masscart", "masspole", "length", "force_mag", "tau", "reset_bound"),
    precisions=("float64", "float32"),
    description="Balance a pole on a cart (gymnasium CartPole-v1 dynamics).",
)


@hookimpl
def kernelgym_register_envs():
    return [SPEC]
