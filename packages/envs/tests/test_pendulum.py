"""Pendulum-v1: one-step parity with gymnasium, reset bounds, invariants, cpu == sim."""

import math

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgym.core import Branch, rng, to_numpy
from kernelgym.core.arrays import to_backend
from kernelgym.envs.classic import pendulum
from kernelgym.envs.classic.pendulum import SPEC, PendulumParams
from kernelgym.envs.runtime.autoreset import clear_step_outputs
from kernelgym.envs.runtime.names import bind_env_programs

PARAMS = SPEC.params
NAMES = [array.name for array in SPEC.state]


def float32s(low, high):
    return st.floats(float(np.float32(low)), float(np.float32(high)), width=32)


# a batch of (theta, theta_dot, torque); torques beyond +-2 exercise the clip
TRANSITIONS = st.lists(
    st.tuples(float32s(-4 * math.pi, 4 * math.pi), float32s(-8, 8), float32s(-3, 3)), min_size=1, max_size=16
)


def run_step(backend, theta, theta_dot, torque, reset_mask=None, seed=0):
    """One launch of the step kernel on ``backend``; returns host copies of everything."""
    n = len(theta)
    arrays = {
        "actions": np.asarray(torque, np.float32).reshape(n, 1),
        "rng_states": rng.seed_streams(seed, n),
        "reset_mask": np.zeros(n, bool) if reset_mask is None else reset_mask,
        "obs": np.zeros((n, 3), np.float32),
        "rewards": np.zeros(n, np.float32),
        "terminated": np.ones(n, bool),
        "theta": np.asarray(theta, np.float32),
        "theta_dot": np.asarray(theta_dot, np.float32),
    }
    device = {name: to_backend(value, backend) for name, value in arrays.items()}
    # what the runtime composes: the masked envs reset (reward 0, flags cleared), the others step
    device.update(_reward_rows=device["rewards"].reshape(n, 1), _truncated=to_backend(np.zeros(n, bool), backend))
    program = Branch(
        "reset_mask",
        then=[*SPEC.load_kernels("reset_kernel"), clear_step_outputs],
        otherwise=SPEC.load_kernels("step_kernel"),
    )
    bind_env_programs(SPEC, [[program]], device, backend)()
    return {name: to_numpy(value).copy() for name, value in device.items()}


def gymnasium_step(theta, theta_dot, torque):
    env = gym.make("Pendulum-v1").unwrapped
    env.reset(seed=0)
    env.state = np.array([theta, theta_dot], dtype=np.float64)
    return env.step(np.array([torque], dtype=np.float32))


@settings(max_examples=40)
@given(TRANSITIONS)
def test_one_step_matches_gymnasium_and_the_reference(transitions):
    theta, theta_dot, torque = map(list, zip(*transitions))
    out = run_step("cpu", theta, theta_dot, torque)
    for k, (th, thd, u) in enumerate(transitions):
        g_obs, g_reward, g_terminated, g_truncated, _ = gymnasium_step(th, thd, u)
        np.testing.assert_allclose(out["obs"][k], g_obs, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(out["rewards"][k], g_reward, rtol=1e-5, atol=1e-5)
        assert out["terminated"][k] == g_terminated is False
        state = {"theta": np.float32(th).reshape(()), "theta_dot": np.float32(thd).reshape(())}
        r_state, r_reward, r_terminated = pendulum.REFERENCE.step(PARAMS, state, np.float32([u]))
        np.testing.assert_allclose(pendulum.REFERENCE.observe(PARAMS, r_state), g_obs, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(r_reward, g_reward, rtol=1e-6, atol=1e-6)
        assert r_terminated is False
        # kernel and reference store the same float32 state
        assert out["theta"][k] == r_state["theta"] and out["theta_dot"][k] == r_state["theta_dot"]
        assert state["theta"] == np.float32(th), "the reference must not modify its input"


def test_torque_is_clipped_to_max_torque():
    out = run_step("cpu", [0.5, 0.5, 0.5], [0.0, 0.0, 0.0], [2.0, 50.0, -2.0])
    clipped = run_step("cpu", [0.5, 0.5, 0.5], [0.0, 0.0, 0.0], [2.0, 2.0, -2.0])
    np.testing.assert_array_equal(out["theta_dot"], clipped["theta_dot"])
    np.testing.assert_array_equal(out["rewards"], clipped["rewards"])


def test_reset_distribution_has_gymnasiums_bounds():
    n = 4000
    out = run_step("cpu", np.full(n, 3.0), np.full(n, 5.0), np.zeros(n), reset_mask=np.ones(n, bool), seed=7)
    assert np.all(np.abs(out["theta"]) <= np.float32(math.pi)) and np.all(np.abs(out["theta_dot"]) <= 1.0)
    # spread over the whole range, centred like gymnasium's U(-pi, pi) x U(-1, 1)
    assert out["theta"].min() < -3.0 and out["theta"].max() > 3.0 and abs(out["theta"].mean()) < 0.15
    assert out["theta_dot"].min() < -0.95 and out["theta_dot"].max() > 0.95 and abs(out["theta_dot"].mean()) < 0.05
    np.testing.assert_array_equal(out["rewards"], 0.0)
    assert not out["terminated"].any()
    np.testing.assert_allclose(out["obs"][:, 0], np.cos(out["theta"]), atol=1e-6)
    env = gym.make("Pendulum-v1").unwrapped
    gym_states = np.array([env.reset(seed=seed)[0] for seed in range(200)])
    assert np.all(np.abs(gym_states[:, 2]) <= 1.0)  # gymnasium draws theta_dot from the same range


def test_reference_reset_stays_in_bounds():
    stream = rng.seed_streams(0, 1)
    for _ in range(200):
        state = pendulum.REFERENCE.reset(PARAMS, stream)
        assert abs(state["theta"]) <= np.float32(math.pi) and abs(state["theta_dot"]) <= 1.0


@settings(max_examples=25)
@given(SPEC.load("state_strategy")(PARAMS), float32s(-2, 2))
def test_invariants_hold_after_a_step(state, torque):
    out = run_step("cpu", [state["theta"]], [state["theta_dot"]], [torque])
    SPEC.load("invariants")(PARAMS, {name: out[name][0] for name in NAMES})


def test_invariant_check_catches_a_speed_beyond_max_speed():
    with pytest.raises(AssertionError, match="theta_dot"):
        pendulum.check_invariants(PARAMS, {"theta": np.float32(0), "theta_dot": np.float32(8.5)})


def test_spec_matches_gymnasium():
    resolved = SPEC.resolve()
    env = gym.make("Pendulum-v1")
    assert resolved.max_episode_steps == env.spec.max_episode_steps == 200
    assert resolved.observation_space == env.observation_space
    assert resolved.action_space == env.action_space


def test_bad_params_name_the_field():
    with pytest.raises(ValueError, match="PendulumParams dt: expected a value > 0, got -0.1"):
        PendulumParams(dt=-0.1)


@pytest.mark.sim
@settings(max_examples=5)
@given(TRANSITIONS)
def test_cpu_and_simulator_agree_bit_for_bit(transitions):
    theta, theta_dot, torque = map(list, zip(*transitions))
    mask = np.arange(len(theta)) % 3 == 0  # some envs reset, the others step
    cpu = run_step("cpu", theta, theta_dot, torque, reset_mask=mask, seed=3)
    sim = run_step("sim", theta, theta_dot, torque, reset_mask=mask, seed=3)
    for name in cpu:
        np.testing.assert_array_equal(cpu[name], sim[name], err_msg=name)


def test_make_truncates_after_200_steps_and_never_terminates():
    import kernelgym.envs as kge

    env = kge.make("Pendulum-v1", num_envs=3, backend="cpu", seed=0)
    env.reset(seed=0)
    actions = np.zeros((3, 1), np.float32)
    for step in range(1, 201):
        _, _, terminated, truncated, _ = env.step(actions, numpy=True)
        assert not terminated.any()
        assert truncated.all() == (step == 200) and truncated.any() == (step == 200)
