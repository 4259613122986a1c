"""Acrobot-v1: one-step RK4 parity with gymnasium, reset bounds, invariants, cpu == sim."""

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgym.core import Branch, rng, to_numpy
from kernelgym.core.arrays import to_backend
from kernelgym.envs.classic import acrobot
from kernelgym.envs.classic.acrobot import SPEC, AcrobotParams
from kernelgym.envs.runtime.autoreset import clear_step_outputs
from kernelgym.envs.runtime.names import bind_env_programs

PARAMS = SPEC.params
NAMES = [array.name for array in SPEC.state]
STATES = SPEC.load("state_strategy")(PARAMS)
TRANSITIONS = st.lists(st.tuples(STATES, st.integers(0, 2)), min_size=1, max_size=16)


def run_step(backend, states, actions, reset_mask=None, seed=0):
    """One launch of the step kernel on ``backend``; ``states`` maps names to (N,) values."""
    n = len(actions)
    arrays = {
        "actions": np.asarray(actions, np.int64),
        "rng_states": rng.seed_streams(seed, n),
        "reset_mask": np.zeros(n, bool) if reset_mask is None else reset_mask,
        "obs": np.zeros((n, 6), np.float32),
        "rewards": np.zeros(n, np.float32),
        "terminated": np.zeros(n, bool),
        **{name: np.asarray(states[name], np.float32) for name in NAMES},
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


def batch(transitions):
    return {name: [s[name] for s, _ in transitions] for name in NAMES}, [a for _, a in transitions]


@settings(max_examples=40)
@given(TRANSITIONS)
def test_one_step_matches_gymnasium_and_the_reference(transitions):
    out = run_step("cpu", *batch(transitions))
    env = gym.make("Acrobot-v1").unwrapped
    env.reset(seed=0)
    for k, (state, action) in enumerate(transitions):
        env.state = np.array([state[name] for name in NAMES], dtype=np.float64)
        g_obs, g_reward, g_terminated, g_truncated, _ = env.step(action)
        np.testing.assert_allclose(out["obs"][k], g_obs, rtol=1e-5, atol=1e-5)
        # same float64 RK4 as gymnasium: termination and reward agree exactly
        assert (out["rewards"][k], out["terminated"][k]) == (g_reward, g_terminated)
        r_state, r_reward, r_terminated = acrobot.REFERENCE.step(PARAMS, state, action)
        np.testing.assert_allclose(acrobot.REFERENCE.observe(PARAMS, r_state), out["obs"][k], rtol=1e-6, atol=1e-6)
        assert (r_reward, r_terminated) == (g_reward, g_terminated)


def test_a_swung_up_acrobot_terminates_with_reward_zero():
    up = {"theta1": [np.pi - 0.01], "theta2": [0.0], "dtheta1": [0.0], "dtheta2": [0.0]}
    out = run_step("cpu", up, [1])
    assert out["terminated"][0] and out["rewards"][0] == 0.0
    down = {name: [0.0] for name in NAMES}
    out = run_step("cpu", down, [2])
    assert not out["terminated"][0] and out["rewards"][0] == -1.0


def test_reset_distribution_has_gymnasiums_bounds():
    n = 4000
    start = {name: np.full(n, 2.0) for name in NAMES}
    out = run_step("cpu", start, np.zeros(n), reset_mask=np.ones(n, bool), seed=11)
    for name in NAMES:
        values = out[name]
        assert np.all(np.abs(values) <= np.float32(0.1)), name
        assert values.min() < -0.098 and values.max() > 0.098 and abs(values.mean()) < 0.01, name
    np.testing.assert_array_equal(out["rewards"], 0.0)
    assert not out["terminated"].any()
    np.testing.assert_allclose(out["obs"][:, 1], np.sin(out["theta1"]), atol=1e-6)
    env = gym.make("Acrobot-v1").unwrapped
    for seed in range(100):
        env.reset(seed=seed)
        assert np.all(np.abs(env.state) <= 0.1)


@settings(max_examples=25)
@given(STATES, st.integers(0, 2))
def test_invariants_hold_after_a_step(state, action):
    out = run_step("cpu", {name: [state[name]] for name in NAMES}, [action])
    SPEC.load("invariants")(PARAMS, {name: out[name][0] for name in NAMES})
    assert SPEC.resolve().observation_space.contains(out["obs"][0])


def test_invariant_check_catches_an_unwrapped_angle():
    state = {name: np.float32(0) for name in NAMES} | {"theta2": np.float32(4.0)}
    with pytest.raises(AssertionError, match="theta2"):
        acrobot.check_invariants(PARAMS, state)


def test_spec_matches_gymnasium():
    resolved = SPEC.resolve()
    env = gym.make("Acrobot-v1")
    assert resolved.max_episode_steps == env.spec.max_episode_steps == 500
    assert resolved.observation_space == env.observation_space
    assert resolved.action_space == env.action_space


def test_bad_params_name_the_field():
    with pytest.raises(ValueError, match="AcrobotParams dt: expected a value > 0, got 0.0"):
        AcrobotParams(dt=0.0)


@pytest.mark.sim
@settings(max_examples=5)
@given(TRANSITIONS)
def test_cpu_and_simulator_agree_bit_for_bit(transitions):
    mask = np.arange(len(transitions)) % 3 == 0  # some envs reset, the others step
    cpu = run_step("cpu", *batch(transitions), reset_mask=mask, seed=3)
    sim = run_step("sim", *batch(transitions), reset_mask=mask, seed=3)
    for name in cpu:
        np.testing.assert_array_equal(cpu[name], sim[name], err_msg=name)
