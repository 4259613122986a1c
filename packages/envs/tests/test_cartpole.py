"""CartPole-v1: the kernel and the CPU reference against gymnasium's CartPoleEnv."""

import math

import gymnasium
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import kernelgym.envs as kge
from kernelgym.envs.classic import cartpole

PARAMS = cartpole.CartPoleParams()
BATCH = 16  # states checked per hypothesis example (one kernel launch for all of them)


@pytest.fixture(scope="module")
def env():
    return kge.make("CartPole-v1", BATCH, backend="cpu", seed=0)


@pytest.fixture(scope="module")
def gym_env():
    environment = gymnasium.make("CartPole-v1").unwrapped
    environment.reset(seed=0)
    return environment


def _gymnasium_step(gym_env, state, action):
    gym_env.state = np.array([float(state[name]) for name in cartpole._STATE_NAMES], dtype=np.float64)
    gym_env.steps_beyond_terminated = None
    obs, reward, terminated, truncated, _ = gym_env.step(int(action))
    return obs, reward, terminated, truncated


def _near_threshold(obs) -> bool:
    # The kernel compares float32 state with the thresholds, gymnasium float64: a value
    # within rounding distance of a threshold may legitimately land on either side.
    return abs(abs(obs[0]) - PARAMS.x_threshold) < 1e-5 or abs(abs(obs[2]) - PARAMS.theta_threshold_radians) < 1e-6


wide_states = st.fixed_dictionaries(
    {
        "x": st.floats(-2.6, 2.6),
        "x_dot": st.floats(-4.0, 4.0),
        "theta": st.floats(-0.25, 0.25),
        "theta_dot": st.floats(-4.0, 4.0),
    }
).map(lambda d: {name: np.float32(value).reshape(()) for name, value in d.items()})


@settings(max_examples=30)
@given(
    states=st.lists(wide_states, min_size=BATCH, max_size=BATCH),
    actions=st.lists(st.integers(0, 1), min_size=BATCH, max_size=BATCH),
)
def test_kernel_step_matches_gymnasium(env, gym_env, states, actions):
    batch = {name: np.array([s[name] for s in states], dtype=np.float32) for name in cartpole._STATE_NAMES}
    env.set_state(batch)
    obs, reward, terminated, truncated, _ = env.step(torch.tensor(actions, dtype=torch.int64))
    for index, (state, action) in enumerate(zip(states, actions)):
        expected_obs, expected_reward, expected_terminated, expected_truncated = _gymnasium_step(gym_env, state, action)
        np.testing.assert_allclose(obs[index].numpy(), expected_obs, rtol=1e-5, atol=1e-6)
        assert reward[index].item() == expected_reward
        assert not truncated[index].item() and not expected_truncated
        if not _near_threshold(expected_obs):
            assert terminated[index].item() == expected_terminated


@settings(max_examples=60)
@given(state=wide_states, action=st.integers(0, 1))
def test_reference_step_matches_gymnasium(gym_env, state, action):
    new_state, reward, terminated = cartpole.reference.step(PARAMS, state, action, None)
    expected_obs, expected_reward, expected_terminated, _ = _gymnasium_step(gym_env, state, action)
    np.testing.assert_allclose(cartpole.reference.observe(PARAMS, new_state), expected_obs, rtol=1e-6, atol=1e-7)
    assert reward == expected_reward
    if not _near_threshold(expected_obs):
        assert terminated == expected_terminated
    assert set(new_state) == set(state)
    assert all(value.dtype == np.float32 and value.shape == () for value in new_state.values())


@settings(max_examples=20)
@given(
    states=st.lists(wide_states, min_size=BATCH, max_size=BATCH),
    actions=st.lists(st.integers(0, 1), min_size=BATCH, max_size=BATCH),
)
def test_kernel_matches_reference(env, states, actions):
    batch = {name: np.array([s[name] for s in states], dtype=np.float32) for name in cartpole._STATE_NAMES}
    env.set_state(batch)
    obs, reward, terminated, _, _ = env.step(np.array(actions, dtype=np.int64), numpy=True)
    for index, (state, action) in enumerate(zip(states, actions)):
        new_state, expected_reward, expected_terminated = cartpole.reference.step(PARAMS, state, action, None)
        np.testing.assert_allclose(obs[index], cartpole.reference.observe(PARAMS, new_state), rtol=1e-5, atol=1e-6)
        assert reward[index] == expected_reward
        if not _near_threshold(obs[index]):
            assert terminated[index] == expected_terminated


def test_sutton_barto_reward_and_semi_implicit_euler_follow_gymnasium():
    env = kge.make("CartPole-v1", 2, backend="cpu", seed=0, sutton_barto_reward=True)
    env.set_state(
        {
            "x": np.float32([0.0, 2.39]),
            "x_dot": np.float32([0.0, 2.0]),
            "theta": np.float32([0.0, 0.0]),
            "theta_dot": np.float32([0.0, 0.0]),
        }
    )
    _, reward, terminated, _, _ = env.step(torch.tensor([1, 1]))
    assert terminated.tolist() == [False, True]
    assert reward.tolist() == [0.0, -1.0]
    params = cartpole.CartPoleParams(semi_implicit_euler=True)
    state = {
        "x": np.float32(0.1).reshape(()),
        "x_dot": np.float32(0.5).reshape(()),
        "theta": np.float32(0.05).reshape(()),
        "theta_dot": np.float32(-0.3).reshape(()),
    }
    semi = kge.make("CartPole-v1", 1, backend="cpu", seed=0, semi_implicit_euler=True)
    semi.set_state(state, index=0)
    obs, _, _, _, _ = semi.step(torch.tensor([0]))
    new_state, _, _ = cartpole.reference.step(params, state, 0, None)
    gym_env = gymnasium.make("CartPole-v1").unwrapped
    gym_env.reset(seed=0)
    gym_env.kinematics_integrator = "semi-implicit"
    expected_obs, _, _, _ = _gymnasium_step(gym_env, state, 0)
    np.testing.assert_allclose(obs[0].numpy(), expected_obs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(cartpole.reference.observe(params, new_state), expected_obs, rtol=1e-6, atol=1e-7)


def test_truncation_at_500_like_gymnasium_time_limit():
    assert gymnasium.spec("CartPole-v1").max_episode_steps == kge.get_spec("CartPole-v1").max_episode_steps == 500
    # Thresholds so wide that the pole never falls: only the time limit ends the episode.
    env = kge.make("CartPole-v1", 3, backend="cpu", seed=1, x_threshold=1e9, theta_threshold_radians=1e9)
    env.reset()
    actions = torch.tensor([0, 1, 1])
    for step in range(1, 501):
        _, reward, terminated, truncated, _ = env.step(actions)
        assert not terminated.any()
        assert truncated.all() == (step == 500), step
        assert truncated.any() == (step == 500), step
        assert (reward == 1.0).all()
    obs, reward, terminated, truncated, _ = env.step(actions)  # NEXT_STEP: the reset step
    assert (reward == 0.0).all() and not terminated.any() and not truncated.any()
    assert (obs.abs() <= 0.05).all()


def test_reset_distribution_is_uniform_within_bounds():
    n = 4000
    env = kge.make("CartPole-v1", n, backend="cpu", seed=123)
    obs, _ = env.reset()
    values = obs.numpy()
    assert values.shape == (n, 4) and values.dtype == np.float32
    assert np.all(np.abs(values) <= 0.05)
    # uniform(-0.05, 0.05): mean 0, standard deviation 0.1 / sqrt(12) ~= 0.0289
    assert np.all(np.abs(values.mean(axis=0)) < 0.003)
    np.testing.assert_allclose(values.std(axis=0), 0.1 / math.sqrt(12), rtol=0.05)
    # and the four variables are drawn independently
    correlation = np.corrcoef(values.T) - np.eye(4)
    assert np.all(np.abs(correlation) < 0.06)
    histogram, _ = np.histogram(values[:, 0], bins=10, range=(-0.05, 0.05))
    assert histogram.min() > 0.8 * n / 10


def test_same_seed_same_episode_different_seed_different_start():
    first = kge.make("CartPole-v1", 8, backend="cpu", seed=5)
    second = kge.make("CartPole-v1", 8, backend="cpu", seed=5)
    other = kge.make("CartPole-v1", 8, backend="cpu", seed=6)
    start_first = first.reset()[0].clone()
    assert torch.equal(start_first, second.reset()[0])
    assert not torch.equal(start_first, other.reset()[0])
    generator = torch.Generator().manual_seed(0)
    for _ in range(200):
        actions = torch.randint(0, 2, (8,), generator=generator)
        a = [t.clone() for t in first.step(actions)[:4]]
        b = second.step(actions)[:4]
        assert all(torch.equal(x, y) for x, y in zip(a, b))


def test_reset_seed_restarts_the_streams():
    env = kge.make("CartPole-v1", 8, backend="cpu", seed=None)
    start = env.reset(seed=42)[0].clone()
    env.step(torch.ones(8, dtype=torch.int64))
    assert torch.equal(env.reset(seed=42)[0], start)
    assert not torch.equal(env.reset()[0], start)  # no seed: the streams go on


@pytest.mark.sim
def test_simulator_kernel_is_bit_identical_to_cpu():
    cpu = kge.make("CartPole-v1", 8, backend="cpu", seed=3)
    sim = kge.make("CartPole-v1", 8, backend="sim", seed=3)
    assert torch.equal(cpu.reset()[0], sim.reset()[0])
    generator = torch.Generator().manual_seed(1)
    for _ in range(12):
        actions = torch.randint(0, 2, (8,), generator=generator)
        expected = [t.clone() for t in cpu.step(actions)[:4]]
        got = sim.step(actions)[:4]
        for want, have in zip(expected, got):
            assert torch.equal(want, have)
    assert all(np.array_equal(cpu.get_state()[name], sim.get_state()[name]) for name in cpu.state)


@given(angle=st.floats(-4.0, 4.0))
def test_small_angle_cos_sin_is_double_precision(angle):
    cos, sin = cartpole._cos_sin(angle, np.float64)
    assert abs(cos - math.cos(angle)) <= 2.3e-16
    assert abs(sin - math.sin(angle)) <= 2.3e-16
    assert (cos, sin) == cartpole._cos_sin.py_func(angle, np.float64)  # compiled and Python give the same bits
