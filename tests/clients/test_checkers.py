"""Each client's own checker accepts kernelgym's envs, out of the box."""

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode

import kernelgym.envs as kge

SINGLE_AGENT_IDS = ["CartPole-v1", "Pendulum-v1", "MountainCar-v0", "Acrobot-v1"]
TAG_IDS = ["TagGridWorld-v0", "TagContinuous-v0"]


# ------------------------------------------------------------------------ gymnasium
@pytest.mark.parametrize("env_id", SINGLE_AGENT_IDS)
def test_gymnasium_make_passes_check_env(env_id):
    env = gymnasium.make(f"kernelgym/{env_id}")
    assert env.spec.max_episode_steps == kge.get_spec(env_id).resolve().max_episode_steps
    check_env(env.unwrapped)  # also renders every advertised render mode
    assert env.unwrapped.metadata["render_modes"] == ["rgb_array"]
    frame = gymnasium.make(f"kernelgym/{env_id}", render_mode="rgb_array")
    frame.reset(seed=0)
    assert frame.render().dtype == np.uint8


def test_gymnasium_make_truncates_at_the_registered_time_limit():
    env = gymnasium.make("kernelgym/Pendulum-v1")  # never terminates: only the limit ends it
    env.reset(seed=0)
    steps, truncated = 0, False
    while not truncated:
        _, _, terminated, truncated, _ = env.step(np.zeros(1, np.float32))
        steps += 1
        assert not terminated
    assert steps == 200


@pytest.mark.parametrize(("mode", "vector_kwargs"), [("sync", {}), ("async", {"context": "spawn"})])
def test_make_vec_sync_and_async_step_kernelgym_envs(mode, vector_kwargs):
    envs = gymnasium.make_vec("kernelgym/CartPole-v1", num_envs=3, vectorization_mode=mode,
                              vector_kwargs=vector_kwargs)
    obs, _ = envs.reset(seed=0)
    assert obs.shape == (3, 4)
    first = obs.copy()
    for _ in range(30):
        obs, rewards, terminated, truncated, _ = envs.step(envs.action_space.sample())
        assert rewards.shape == (3,)
    again, _ = envs.reset(seed=0)
    np.testing.assert_array_equal(again, first)
    envs.close()


# A fresh interpreter per case: whether a fork is safe depends on what the parent ran before.
_ASYNC_WITH_DEFAULT_CONTEXT = """
import gymnasium, numpy as np, kernelgym.envs as kge
if {parent_runs_an_env}:
    kge.make("CartPole-v1", 64, backend="cpu").reset(seed=0)  # starts numba's OpenMP threads here
envs = gymnasium.make_vec("kernelgym/CartPole-v1", num_envs=3, vectorization_mode="async")
try:
    obs, _ = envs.reset(seed=0)
    for _ in range(30):
        obs, rewards, *_ = envs.step(envs.action_space.sample())
    print("stepped", obs.shape, rewards.shape)
except RuntimeError as error:
    print("refused:", error)
envs.close()
"""


def _run_async_with_default_context(parent_runs_an_env: bool) -> str:
    import subprocess
    import sys

    code = _ASYNC_WITH_DEFAULT_CONTEXT.format(parent_runs_an_env=parent_runs_an_env)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Terminating" not in done.stderr  # no worker killed by OpenMP
    return done.stdout


def test_make_vec_async_forks_its_workers_by_default():
    assert "stepped (3, 4) (3,)" in _run_async_with_default_context(parent_runs_an_env=False)


def test_make_vec_async_fork_after_openmp_is_refused_with_the_fix_named():
    """GNU OpenMP kills a forked child that enters a parallel region once the parent
    has started its threads: the worker must say so, not die."""
    out = _run_async_with_default_context(parent_runs_an_env=True)
    assert "refused:" in out and "vector_kwargs={'context': 'spawn'}" in out, out


def test_multi_agent_ids_name_the_adapters_that_fit():
    with pytest.raises(TypeError, match="multi-agent.*KernelParallelEnv"):
        gymnasium.make("kernelgym/TagGridWorld-v0")


# ------------------------------------------------------------------------ PettingZoo
@pytest.mark.parametrize("env_id", TAG_IDS)
def test_pettingzoo_parallel_api_and_seed_tests(env_id):
    from pettingzoo.test import parallel_api_test, parallel_seed_test

    from kernelgym.envs.pettingzoo_adapter import KernelParallelEnv

    parallel_api_test(KernelParallelEnv(env_id, seed=0), num_cycles=100)
    parallel_seed_test(lambda: KernelParallelEnv(env_id), num_cycles=100)


def test_pettingzoo_agents_own_their_action_spaces():
    from kernelgym.envs.pettingzoo_adapter import KernelParallelEnv

    env, other = KernelParallelEnv("TagGridWorld-v0"), KernelParallelEnv("TagGridWorld-v0")
    first, second = env.possible_agents[:2]
    assert env.action_space(first) is not env.action_space(second)
    assert env.action_space(first) is not other.action_space(first)


# --------------------------------------------------------------------------- TorchRL
def test_torchrl_gym_env_by_id_passes_check_env_specs():
    from torchrl.envs import GymEnv
    from torchrl.envs.utils import check_env_specs

    check_env_specs(GymEnv("kernelgym/CartPole-v1"))


def test_torchrl_gym_wrapper_over_make_vec_passes_check_env_specs():
    """No argument beyond the id and the count: the vector entry point's default
    (same_step) is a mode TorchRL accepts, as gymnasium's default (next_step) is not."""
    from torchrl.envs import GymWrapper
    from torchrl.envs.utils import check_env_specs

    vector = gymnasium.make_vec("kernelgym/CartPole-v1", 16, vectorization_mode="vector_entry_point")
    assert vector.autoreset_mode is AutoresetMode.SAME_STEP
    env = GymWrapper(vector)
    check_env_specs(env)
    assert env.batch_size == (16,)


def test_torchrl_gym_wrapper_refuses_next_step_loudly():
    """A user who asks for next_step gets TorchRL's own error, never silent wrong transitions."""
    from torchrl.envs import GymWrapper

    vector = gymnasium.make_vec("kernelgym/CartPole-v1", 4, autoreset_mode="next_step")
    with pytest.raises(RuntimeError, match="SAME_STEP or DISABLED"):
        GymWrapper(vector)


# ------------------------------------------------------------------------------ skrl
def test_skrl_wrap_env_on_the_adapter_keeps_the_batch():
    from skrl.envs.wrappers.torch import wrap_env

    env = wrap_env(gymnasium.make_vec("kernelgym/CartPole-v1", num_envs=16, vectorization_mode="vector_entry_point",
                                      autoreset_mode="same_step", backend="cpu"), verbose=False)
    assert env.num_envs == 16 and env.observation_space.shape == (4,)
    obs, _ = env.reset()
    assert obs.shape == (16, 4)
    obs, rewards, terminated, truncated, _ = env.step(torch_actions((16, 1)))
    assert obs.shape == (16, 4) and rewards.shape == (16, 1) and terminated.shape == (16, 1)


def test_skrl_auto_detection_refuses_the_raw_vector_env_loudly():
    """skrl picks a wrapper by base-class module name; KernelVectorEnv hands out views
    that skrl's trainer would keep across a step, so it is not a gymnasium env and
    skrl must refuse it rather than guess (the adapter above is the one-line form)."""
    from skrl.envs.wrappers.torch import wrap_env

    with pytest.raises(ValueError, match="Unknown wrapper type"):
        wrap_env(kge.make("CartPole-v1", 16, backend="cpu"), verbose=False)


def torch_actions(shape):
    import torch

    return torch.zeros(shape, dtype=torch.int64)


# ------------------------------------------------------------------------------- SB3
def test_sb3_vec_env_reports_terminal_observations_truncation_and_episodes():
    from stable_baselines3.common.env_checker import check_env as _unused  # noqa: F401 - SB3 is installed
    from stable_baselines3.common.vec_env import VecEnv

    from kernelgym.envs.sb3 import KernelSB3VecEnv

    venv = KernelSB3VecEnv("CartPole-v1", 4, backend="cpu", seed=0, max_episode_steps=5)
    assert isinstance(venv, VecEnv) and venv.observation_space.shape == (4,)
    obs = venv.reset()
    steps = 0
    while True:
        venv.step_async(np.ones((4, 1), dtype=np.int64))  # SB3's (N, 1) Discrete shape is accepted
        new_obs, rewards, dones, infos = venv.step_wait()
        steps += 1
        assert not np.shares_memory(new_obs, obs)
        if dones.any():
            break
        obs = new_obs
    for index in np.flatnonzero(dones):
        info = infos[index]
        assert info["terminal_observation"].shape == (4,)
        assert info["episode"]["l"] == steps and info["episode"]["r"] == float(steps)
        assert info["TimeLimit.truncated"] == (steps == 5)
        assert np.all(np.abs(new_obs[index]) <= 0.05)  # already the next episode's start
    assert all(info == {} for info, done in zip(infos, dones) if not done)
