"""gymnasium.make_vec("kernelgym/<id>") returns a working gymnasium 1.x VectorEnv."""

import gymnasium
import numpy as np
import pytest
from gymnasium.envs.registration import load_env_creator
from gymnasium.vector import AutoresetMode

import kernelgym.envs as kge
from kernelgym.envs.gymnasium_adapter import KernelGymnasiumVectorEnv
from kernelgym.envs.gymnasium_env import KernelGymnasiumEnv


def _make(num_envs=4, **kwargs):
    return gymnasium.make_vec(
        "kernelgym/CartPole-v1", num_envs=num_envs, vectorization_mode="vector_entry_point", backend="cpu", **kwargs
    )


def test_every_kernelgym_id_is_registered_with_gymnasium():
    for env_id in kge.list_envs():
        spec = gymnasium.spec(f"kernelgym/{env_id}")
        assert load_env_creator(spec.vector_entry_point) is KernelGymnasiumVectorEnv
        assert load_env_creator(spec.entry_point) is KernelGymnasiumEnv
        assert spec.max_episode_steps == kge.get_spec(env_id).resolve().max_episode_steps


def test_make_vec_gives_a_vector_env_with_gymnasium_conventions():
    envs = _make(4)
    assert isinstance(envs, gymnasium.vector.VectorEnv)
    assert envs.num_envs == 4
    assert envs.single_observation_space == gymnasium.make("CartPole-v1").observation_space
    assert envs.single_action_space == gymnasium.spaces.Discrete(2)
    # same_step by default: the mode TorchRL, skrl and SB3 expect of a vector env
    assert envs.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    assert envs.autoreset_mode is AutoresetMode.SAME_STEP
    obs, info = envs.reset(seed=0)
    assert isinstance(obs, np.ndarray) and obs.shape == (4, 4) and obs.dtype == np.float32
    assert envs.observation_space.contains(obs)
    assert info == {}
    actions = envs.action_space.sample()
    obs2, rewards, terminated, truncated, info = envs.step(actions)
    assert isinstance(rewards, np.ndarray) and rewards.shape == (4,)
    assert terminated.dtype == np.bool_ and truncated.dtype == np.bool_
    assert not np.shares_memory(obs, obs2)  # arrays handed out belong to the caller
    envs.close()


def test_next_step_autoreset_matches_gymnasiums_cartpole_vector_env():
    """Step both from the same states: flags, rewards, resets and time limits agree."""
    ours = _make(6, max_episode_steps=7, autoreset_mode="next_step")
    assert ours.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    theirs = gymnasium.make_vec("CartPole-v1", num_envs=6, vectorization_mode="vector_entry_point", max_episode_steps=7)
    obs, _ = ours.reset(seed=0)
    theirs.reset(seed=0)
    generator = np.random.default_rng(0)
    reset_steps = 0
    for _ in range(60):
        theirs.unwrapped.state = obs.T.astype(np.float64)  # same start for this step
        actions = generator.integers(0, 2, size=6)
        obs, rewards, terminated, truncated, _ = ours.step(actions)
        their_obs, their_rewards, their_terminated, their_truncated, _ = theirs.step(actions)
        resetting = their_rewards == 0.0  # gymnasium's NEXT_STEP reset step
        reset_steps += resetting.sum()
        np.testing.assert_array_equal(rewards, their_rewards)
        np.testing.assert_array_equal(truncated, their_truncated)
        np.testing.assert_array_equal(terminated, their_terminated)
        np.testing.assert_allclose(obs[~resetting], their_obs[~resetting], rtol=1e-5, atol=1e-6)
        assert np.all(np.abs(obs[resetting]) <= 0.05)
    assert reset_steps > 0
    ours.close()
    theirs.close()


def test_same_step_mode_reports_final_observations():
    envs = _make(2, max_episode_steps=3)  # same_step: the default
    assert envs.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    envs.reset(seed=1)
    for _ in range(2):
        _, _, _, truncated, info = envs.step(np.zeros(2, dtype=np.int64))
        assert not info["_final_obs"].any()
    obs, _, terminated, truncated, info = envs.step(np.zeros(2, dtype=np.int64))
    assert (terminated | truncated).all() and info["_final_obs"].all()
    assert info["final_obs"].shape == (2, 4)
    assert np.all(np.abs(obs) <= 0.05)  # already the first observation of the next episode


def test_reset_seed_reproduces_and_step_validates():
    envs = _make(3)
    first, _ = envs.reset(seed=7)
    again, _ = envs.reset(seed=7)
    np.testing.assert_array_equal(first, again)
    with pytest.raises(ValueError, match="actions"):
        envs.step(np.array([0, 1, 2]))
    with pytest.raises(ValueError, match="shape"):
        envs.step([0, 1])


def test_render_returns_one_frame_per_env_or_refuses():
    envs = _make(2)
    envs.reset(seed=0)
    with pytest.raises(ValueError, match="render_mode"):
        envs.render()
    envs = _make(2, render_mode="rgb_array")
    envs.reset(seed=0)
    frames = envs.render()
    assert len(frames) == 2 and all(frame.dtype == np.uint8 and frame.ndim == 3 for frame in frames)


def test_the_vector_adapter_announces_what_clients_read():
    envs = _make(3, autoreset_mode="next_step")
    assert envs.autoreset_mode is AutoresetMode.NEXT_STEP  # TorchRL reads the attribute
    assert envs.spec.max_episode_steps == 500
    assert envs.metadata["render_fps"] == 50 and envs.metadata["render_modes"] == ["rgb_array"]
    envs.close()


def test_render_modes_list_only_modes_that_work():
    for env_id in kge.list_envs():
        spec = kge.get_spec(env_id)
        envs = gymnasium.make_vec(
            f"kernelgym/{env_id}", num_envs=2, vectorization_mode="vector_entry_point", backend="cpu"
        )
        assert envs.metadata["render_modes"] == (["rgb_array"] if spec.render is not None else [])
        for mode in envs.metadata["render_modes"]:
            rendering = gymnasium.make_vec(
                f"kernelgym/{env_id}",
                num_envs=2,
                backend="cpu",
                vectorization_mode="vector_entry_point",
                render_mode=mode,
            )
            rendering.reset(seed=0)
            assert all(frame.dtype == np.uint8 and frame.ndim == 3 for frame in rendering.render())


def test_gymnasiums_record_episode_statistics_reads_the_adapter():
    envs = gymnasium.wrappers.vector.RecordEpisodeStatistics(_make(2, max_episode_steps=3))
    envs.reset(seed=0)
    for _ in range(2):
        _, _, _, _, info = envs.step(np.zeros(2, dtype=np.int64))
        assert "episode" not in info
    _, _, terminated, truncated, info = envs.step(np.zeros(2, dtype=np.int64))
    finished = terminated | truncated
    assert finished.any()
    np.testing.assert_array_equal(info["_episode"], finished)
    np.testing.assert_array_equal(info["episode"]["l"][finished], 3)  # pushed left, CartPole lasts 3+ steps
    np.testing.assert_array_equal(info["episode"]["r"][finished], 3.0)


def test_each_adapter_owns_its_spaces():
    first, second = _make(2), _make(2)
    assert first.single_action_space is not second.single_action_space
    second.single_action_space.seed(0)
    draws = [second.single_action_space.sample() for _ in range(20)]
    second.single_action_space.seed(0)
    first.single_action_space.seed(1)  # seeding one adapter's space leaves the other's alone
    assert [second.single_action_space.sample() for _ in range(20)] == draws


@pytest.mark.parametrize("env_id", ["TagGridWorld-v0", "TagContinuous-v0"])
def test_a_multi_agent_vector_envs_spaces_agree_with_what_it_returns(env_id):
    from gymnasium.vector.utils import batch_space

    envs = gymnasium.make_vec(
        f"kernelgym/{env_id}", num_envs=3, vectorization_mode="vector_entry_point", backend="cpu", seed=0
    )
    try:
        num_agents = envs.unwrapped.env.num_agents
        assert envs.single_observation_space.shape[0] == num_agents
        assert batch_space(envs.single_observation_space, 3) == envs.observation_space
        assert batch_space(envs.single_action_space, 3) == envs.action_space
        obs, _ = envs.reset(seed=1)
        assert obs in envs.observation_space and all(row in envs.single_observation_space for row in obs)
        envs.action_space.seed(0)
        obs, rewards, terminated, truncated, _ = envs.step(envs.action_space.sample())
        assert obs in envs.observation_space
        assert rewards.shape == (3, num_agents) and terminated.shape == truncated.shape == (3,)
    finally:
        envs.close()
