"""Dict observations through each client, on the example plugin's GridGoal-v0
(``{"image": (2, 5, 5) uint8, "vector": (2,) float32}``): gymnasium's checker,
gymnasium's vector spaces, SB3's ``MultiInputPolicy``, TorchRL's ``Composite`` specs and
PettingZoo's API test.
"""

import gymnasium
import pytest
import torch
from gymnasium.utils.env_checker import check_env

import kernelgym.envs as kge
from sb3_evaluation import mean_episode_return

ENV_ID = "GridGoal-v0"


def test_the_dict_env_comes_from_the_example_plugin():
    assert kge.get_spec(ENV_ID).distribution == "kernelgym-example-plugin"


def test_gymnasium_check_env_passes_the_dict_env():
    env = gymnasium.make(f"kernelgym/{ENV_ID}")
    check_env(env.unwrapped, skip_render_check=True)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs) and set(obs) == {"image", "vector"}


@pytest.mark.parametrize("mode", ["vector_entry_point", "sync"])
@pytest.mark.parametrize("autoreset_mode", ["same_step", "next_step"])
def test_make_vec_spaces_agree_with_what_it_returns(mode, autoreset_mode):
    # the vector entry point takes the mode as a keyword, gymnasium's own vector envs in vector_kwargs
    arguments = (
        {"autoreset_mode": autoreset_mode}
        if mode == "vector_entry_point"
        else {"vector_kwargs": {"autoreset_mode": gymnasium.vector.AutoresetMode[autoreset_mode.upper()]}}
    )
    envs = gymnasium.make_vec(f"kernelgym/{ENV_ID}", 4, vectorization_mode=mode, **arguments)
    obs, _ = envs.reset(seed=0)
    assert envs.observation_space.contains(obs), (envs.observation_space, obs)
    for _ in range(25):  # past the time limit: every env ends an episode at least once
        obs, _, _, _, info = envs.step(envs.action_space.sample())
        assert envs.observation_space.contains(obs)
    if mode == "vector_entry_point" and autoreset_mode == "same_step":
        assert envs.observation_space.contains(info["final_obs"])
    envs.close()


def test_sb3_multi_input_policy_learns_the_dict_env():
    """PPO's mean episode return rises from an untrained policy's (about -0.7) to near the best
    (about 0.9) in 12k steps."""
    from stable_baselines3 import PPO

    from kernelgym.envs.sb3 import KernelSB3VecEnv

    torch.manual_seed(0)
    venv = KernelSB3VecEnv(ENV_ID, num_envs=16, backend="cpu", seed=0)
    model = PPO("MultiInputPolicy", venv, n_steps=64, batch_size=256, learning_rate=1e-3, seed=0, verbose=0)

    before = mean_episode_return(model, venv, 200)
    model.learn(12_000)
    after = mean_episode_return(model, venv, 200)
    assert before < 0.2 and after > 0.6, f"mean return {before:.2f} before training, {after:.2f} after"


def test_torchrl_composite_specs_pass_check_env_specs():
    from torchrl.data import Composite
    from torchrl.envs import GymEnv, GymWrapper
    from torchrl.envs.utils import check_env_specs

    single = GymEnv(f"kernelgym/{ENV_ID}")
    assert isinstance(single.observation_spec, Composite) and {"image", "vector"} <= set(single.observation_spec.keys())
    check_env_specs(single)
    vector = GymWrapper(gymnasium.make_vec(f"kernelgym/{ENV_ID}", 8, vectorization_mode="vector_entry_point"))
    check_env_specs(vector)
    rollout = vector.rollout(30, break_when_any_done=False)
    assert rollout["next", "image"].shape == (8, 30, 2, 5, 5) and rollout["next", "image"].dtype == torch.uint8


def test_pettingzoo_parallel_api_test_passes_the_dict_env():
    from pettingzoo.test import parallel_api_test

    from kernelgym.envs.pettingzoo_adapter import KernelParallelEnv

    env = KernelParallelEnv(ENV_ID, seed=0)
    parallel_api_test(env, num_cycles=100)
    observations, _ = env.reset(seed=1)
    assert env.observation_space("agent_0").contains(observations["agent_0"])
