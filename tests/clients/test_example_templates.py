"""The example plugin's templates trained with SB3: the multi-agent Ring over every (env, agent) pair, and
the continuous-action PointMass.

``KernelSB3VecEnv(..., agents_as_envs=True)`` shows SB3 each agent of each env as one env,
so one shared policy learns from all of them (parameter sharing).
"""

import numpy as np
import pytest
import torch

from sb3_evaluation import mean_episode_return

ENV_ID = "Ring-v0"  # the example plugin's multi-agent template


def test_sb3_refuses_a_multi_agent_env_unless_agents_are_envs():
    from kernelgym.envs.sb3 import KernelSB3VecEnv

    with pytest.raises(TypeError, match="agents_as_envs=True"):
        KernelSB3VecEnv(ENV_ID, num_envs=2, backend="cpu")


def test_a_wrong_action_shape_names_the_shape_sb3_sees():
    from kernelgym.envs.sb3 import KernelSB3VecEnv

    venv = KernelSB3VecEnv(ENV_ID, num_envs=2, backend="cpu", seed=0, agents_as_envs=True)
    venv.reset()
    rows = 2 * venv.env.num_agents
    with pytest.raises(
        ValueError, match=rf"actions: expected shape \({rows},\) \(one row per agent: agents_as_envs\), got \(2,\)"
    ):
        venv.step_async(np.zeros(2, np.int64))
    venv.close()


def test_every_agent_is_one_sb3_env():
    from kernelgym.envs.sb3 import KernelSB3VecEnv

    venv = KernelSB3VecEnv(ENV_ID, num_envs=3, backend="cpu", seed=0, agents_as_envs=True, max_episode_steps=4)
    agents = venv.env.num_agents
    assert venv.num_envs == 3 * agents and venv.observation_space.shape == (3,)
    obs = venv.reset()
    assert obs.shape == (3 * agents, 3)
    # row e * A + a is agent a of env e: its right neighbour's value is agent a + 1's own
    for env in range(3):
        rows = obs[env * agents : (env + 1) * agents]
        np.testing.assert_array_equal(rows[:, 2], np.roll(rows[:, 0], -1))
    for _step in range(4):
        obs, rewards, dones, infos = venv.step(np.full(venv.num_envs, 1))
        assert rewards.shape == dones.shape == (3 * agents,)
    assert dones.all()  # the time limit ends every env, so every agent's episode
    assert all(info["TimeLimit.truncated"] and info["terminal_observation"].shape == (3,) for info in infos)
    returns = np.array([info["episode"]["r"] for info in infos])
    assert np.all(returns <= 0) and len(set(returns.tolist())) > 1  # each agent its own return
    venv.close()


def test_sb3_ppo_learns_the_ring_with_one_shared_policy():
    """Agents learn to move toward their neighbours' mean: the mean return per agent rises."""
    from stable_baselines3 import PPO

    from kernelgym.envs.sb3 import KernelSB3VecEnv

    torch.manual_seed(0)
    venv = KernelSB3VecEnv(ENV_ID, num_envs=8, backend="cpu", seed=0, agents_as_envs=True)
    model = PPO("MlpPolicy", venv, n_steps=64, batch_size=256, learning_rate=1e-3, seed=0, verbose=0)

    before = mean_episode_return(model, venv, 200)
    model.learn(30_000)
    after = mean_episode_return(model, venv, 200)
    assert after > before + 5.0, f"mean return per agent {before:.2f} before training, {after:.2f} after"
    venv.close()


def test_sb3_ppo_learns_the_point_mass_with_box_actions():
    """The continuous-action template: PPO pushes the mass toward the origin (mean return rises)."""
    from stable_baselines3 import PPO

    from kernelgym.envs.sb3 import KernelSB3VecEnv

    torch.manual_seed(0)
    venv = KernelSB3VecEnv("PointMass-v0", num_envs=16, backend="cpu", seed=0)
    model = PPO("MlpPolicy", venv, n_steps=64, batch_size=256, learning_rate=1e-3, seed=0, verbose=0)

    before = mean_episode_return(model, venv, 64)
    model.learn(40_000)
    after = mean_episode_return(model, venv, 64)
    assert after > before + 10.0, f"mean return {before:.2f} before training, {after:.2f} after"
    venv.close()
