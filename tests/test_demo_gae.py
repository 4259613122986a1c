"""Property tests of the PPO demo's pieces that need no env: advantages and config checks."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgym.cli.ppo import PPOConfig, compute_gae


def reference_gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    """GAE by its definition: A_t = sum_k (gamma lam)^k delta_{t+k}, within one episode."""
    steps, envs = rewards.shape
    advantages = np.zeros((steps, envs))
    for j in range(envs):
        for t in range(steps):
            total, weight = 0.0, 1.0
            for k in range(t, steps):
                bootstrap = 0.0 if terminated[k, j] else gamma * next_values[k, j]
                total += weight * (rewards[k, j] + bootstrap - values[k, j])
                if terminated[k, j] or truncated[k, j]:
                    break  # the next row belongs to another episode
                weight *= gamma * lam
            advantages[t, j] = total
    return advantages


@st.composite
def fragments(draw):
    steps = draw(st.integers(1, 10))
    envs = draw(st.integers(1, 4))
    floats = st.floats(-10, 10, allow_nan=False, width=32)

    def matrix(elements):
        return np.array(draw(st.lists(elements, min_size=steps * envs, max_size=steps * envs))).reshape(steps, envs)

    terminated = matrix(st.booleans())
    truncated = matrix(st.booleans()) & ~terminated
    return (
        matrix(floats),
        matrix(floats),
        matrix(floats),
        terminated,
        truncated,
        draw(st.floats(0, 1)),
        draw(st.floats(0, 1)),
    )


@settings(max_examples=60)
@given(fragments())
def test_gae_matches_its_definition_within_episodes(fragment):
    rewards, values, next_values, terminated, truncated, gamma, lam = fragment
    as_tensor = lambda a: torch.as_tensor(a, dtype=torch.float64)  # noqa: E731
    got = compute_gae(
        as_tensor(rewards),
        as_tensor(values),
        as_tensor(next_values),
        as_tensor(terminated),
        as_tensor(terminated | truncated),
        gamma,
        lam,
    )
    expected = reference_gae(rewards, values, next_values, terminated, truncated, gamma, lam)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-9, atol=1e-9)


@given(st.integers(1, 8), st.floats(0, 1), st.floats(0, 1))
def test_gae_of_truncated_step_bootstraps_from_final_value(steps, gamma, lam):
    # a lone truncated transition: advantage is r + gamma V(final) - V(x), nothing from later rows
    rewards = torch.ones(steps, 1, dtype=torch.float64)
    values = torch.zeros(steps, 1, dtype=torch.float64)
    next_values = torch.full((steps, 1), 2.0, dtype=torch.float64)
    over = torch.ones(steps, 1, dtype=torch.float64)
    got = compute_gae(rewards, values, next_values, torch.zeros_like(over), over, gamma, lam)
    assert torch.allclose(got, torch.full_like(got, 1.0 + 2.0 * gamma))


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("seed", -1, "expected an int >= 0"),
        ("num_envs", 0, "expected an int >= 1"),
        ("num_steps", 2.5, "expected an int >= 1"),
        ("learning_rate", 0.0, "expected a number > 0"),
        ("time_limit_s", -1.0, "expected a number > 0"),
        ("gamma", 1.5, "expected a number in [0, 1]"),
        ("num_minibatches", 3, "expected a divisor of num_envs * num_steps"),
    ],
)
def test_config_rejects_bad_values_naming_field_expected_and_received(field, value, expected):
    with pytest.raises(ValueError) as error:
        PPOConfig(**{field: value})
    message = str(error.value)
    assert field in message and expected in message and repr(value) in message


def test_default_config_is_valid_and_targets_cartpole_solved():
    config = PPOConfig()
    assert config.env_id == "CartPole-v1" and config.target_return == 475.0
    assert config.time_limit_s <= 300 and not math.isnan(config.learning_rate)
