"""The PPO demo learns CartPole-v1 and seeded runs reproduce (short versions of `kernelgym demo`)."""

import pytest
import torch

from kernelgym.cli.ppo import PPOConfig, train

RANDOM_POLICY_RETURN = 22  # mean CartPole-v1 return of uniformly random actions


@pytest.mark.slow
def test_short_run_learns_well_above_random():
    config = PPOConfig(seed=1, backend="cpu", target_return=150.0, max_env_steps=150_000, time_limit_s=110.0)
    result = train(config, progress=False)
    assert result.mean_returns[0] < 2 * RANDOM_POLICY_RETURN  # it starts near random ...
    assert result.reached_target, result.mean_returns  # ... and gets 7x better within 150k steps
    assert result.final_return >= 150.0
    assert result.total_env_steps <= 150_000
    assert len(result.env_steps) == len(result.wall_s) == len(result.mean_returns)
    assert result.env_steps == sorted(result.env_steps)


@pytest.mark.slow
def test_same_seed_same_run_and_another_seed_differs():
    def short_run(seed):
        config = PPOConfig(seed=seed, backend="cpu", num_envs=16, num_steps=32, max_env_steps=3 * 16 * 32)
        return train(config, progress=False)

    first, again, other = short_run(5), short_run(5), short_run(6)
    assert first.env_steps == again.env_steps == [512, 1024, 1536]
    assert first.mean_returns == again.mean_returns
    for name, weights in first.agent.state_dict().items():
        assert torch.equal(weights, again.agent.state_dict()[name]), name
    assert any(
        not torch.equal(weights, other.agent.state_dict()[name]) for name, weights in first.agent.state_dict().items()
    )
