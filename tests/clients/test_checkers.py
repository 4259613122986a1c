"""Each client's own checker accepts kernelgym's envs, out of the box."""

import os

import gymnasium
import numpy as np
import pytest
import torch
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
    envs = gymnasium.make_vec("kernelgym/CartPole-v1", num_envs=3, vectorization_mode=mode, vector_kwargs=vector_kwargs)
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
    env = kge.make("CartPole-v1", 1024, backend="cpu")  # enough envs for a parallel launch
    env.reset(seed=0)
    env.step(np.zeros(1024, np.int64))
    from numba.np.ufunc import parallel
    assert parallel._is_initialized  # numba's OpenMP threads run in the parent
envs = gymnasium.make_vec("kernelgym/CartPole-v1", num_envs=3, vectorization_mode="async")
obs, _ = envs.reset(seed=0)
for _ in range(30):
    obs, rewards, *_ = envs.step(envs.action_space.sample())
print("stepped", obs.shape, rewards.shape)
envs.close()
"""


def _run_async_with_default_context(parent_runs_an_env: bool) -> str:
    import subprocess
    import sys

    code = _ASYNC_WITH_DEFAULT_CONTEXT.format(parent_runs_an_env=parent_runs_an_env)
    # the default cpu launches (the thread team), whatever this run chose
    env = {name: value for name, value in os.environ.items() if name != "KERNELGYM_CPU_THREADS"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    assert "Terminating" not in done.stderr  # no worker killed by OpenMP
    return done.stdout


def test_make_vec_async_forks_its_workers_by_default():
    assert "stepped (3, 4) (3,)" in _run_async_with_default_context(parent_runs_an_env=False)


def test_make_vec_async_forks_after_the_parent_ran_parallel_launches():
    """GNU OpenMP kills a forked child that enters a parallel region once the parent
    has started its threads; a one-env worker's launches run in its own thread."""
    assert "stepped (3, 4) (3,)" in _run_async_with_default_context(parent_runs_an_env=True)


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
    """The one-line form, no arguments beyond the id and the count."""
    from skrl.envs.wrappers.torch import wrap_env
    from skrl.envs.wrappers.torch.gymnasium_envs import GymnasiumWrapper

    env = wrap_env(gymnasium.make_vec("kernelgym/CartPole-v1", 16), verbose=False)
    assert isinstance(env, GymnasiumWrapper)  # auto-detected, and as a vector env
    assert env.num_envs == 16 and env.observation_space.shape == (4,)
    assert env.action_space == gymnasium.spaces.Discrete(2)
    obs, _ = env.reset()
    assert obs.shape == (16, 4)
    obs, rewards, terminated, truncated, _ = env.step(torch.zeros((16, 1), dtype=torch.int64))
    assert obs.shape == (16, 4) and rewards.shape == (16, 1) and terminated.shape == (16, 1)
    assert truncated.shape == (16, 1)


def test_skrl_trainer_records_observations_the_next_step_does_not_overwrite():
    """skrl's trainer keeps a step's observations across the next env.step and records
    them then (skrl/trainers/torch/sequential.py, `observations = next_observations`):
    what it recorded as a transition's start must be the previous step's end."""
    from skrl.agents.torch.ppo import PPO, PPO_CFG
    from skrl.envs.wrappers.torch import wrap_env
    from skrl.memories.torch import RandomMemory
    from skrl.trainers.torch import SequentialTrainer

    class RecordingPPO(PPO):
        def record_transition(self, *, observations, next_observations, **kwargs):
            recorded.append((observations.clone(), next_observations.clone()))
            super().record_transition(observations=observations, next_observations=next_observations, **kwargs)

    recorded = []
    env = wrap_env(gymnasium.make_vec("kernelgym/CartPole-v1", 16, seed=0), verbose=False)
    cfg = PPO_CFG(rollouts=64)
    cfg.experiment.write_interval = cfg.experiment.checkpoint_interval = 0
    models = _skrl_models(env)
    agent = RecordingPPO(
        models=models,
        memory=RandomMemory(memory_size=64, num_envs=16),
        cfg=cfg,
        observation_space=env.observation_space,
        action_space=env.action_space,
        device=env.device,
    )
    SequentialTrainer(
        env=env,
        agents=agent,
        cfg={"timesteps": 30, "headless": True, "disable_progressbar": True, "close_environment_at_exit": False},
    ).train()
    assert len(recorded) == 30
    for (_, previous_end), (start, end) in zip(recorded, recorded[1:]):
        torch.testing.assert_close(start, previous_end)  # the chain of transitions is unbroken
        assert not torch.equal(start, end)  # and a start is not its own end


def test_the_raw_vector_env_hands_out_views_that_skrl_must_not_keep():
    """Why skrl gets the gymnasium adapter: KernelVectorEnv's outputs alias its buffers,
    and skrl's wrappers keep torch tensors as they come (a reshape, no copy)."""
    from skrl.envs.wrappers.torch import wrap_env

    env = kge.make("CartPole-v1", 16, backend="cpu", autoreset_mode="same_step")
    env.reset(seed=0)
    first = env.step(torch.zeros(16, dtype=torch.int64))[0]
    kept = first.clone()
    second = env.step(torch.ones(16, dtype=torch.int64))[0]
    assert first.data_ptr() == second.data_ptr() and not torch.equal(first, kept)
    # skrl picks a wrapper by the names of the env's direct base classes (gymnasium.*, isaaclab.*,
    # ...); KernelVectorEnv has none of them, so skrl refuses it instead of keeping its views
    with pytest.raises(ValueError, match="Unknown wrapper type"):
        wrap_env(env, verbose=False)


def _skrl_models(env):
    from skrl.models.torch import CategoricalMixin, DeterministicMixin, Model

    class Policy(CategoricalMixin, Model):
        def __init__(self):
            Model.__init__(
                self, observation_space=env.observation_space, action_space=env.action_space, device=env.device
            )
            CategoricalMixin.__init__(self)
            self.net = torch.nn.Linear(self.num_observations, self.num_actions)

        def compute(self, inputs, role):
            return self.net(inputs["observations"]), {}

    class Value(DeterministicMixin, Model):
        def __init__(self):
            Model.__init__(
                self, observation_space=env.observation_space, action_space=env.action_space, device=env.device
            )
            DeterministicMixin.__init__(self)
            self.net = torch.nn.Linear(self.num_observations, 1)

        def compute(self, inputs, role):
            return self.net(inputs["observations"]), {}

    return {"policy": Policy(), "value": Value()}


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
