"""Each client's PPO learns kernelgym's CartPole: the mean return of 20 episodes rises
from about 20 (a random policy) to above 200 within a fixed budget of env steps.

Asserted on returns, never on time; seeds are fixed so a run is reproducible.
"""

import functools
import os

import gymnasium
import numpy as np
import torch

import kernelgym.envs  # noqa: F401 - registers "kernelgym/<id>" with gymnasium
from kernelgym.memory import RandomMemory as KernelgymRandomMemory

SEED = int(os.environ.get("KERNELGYM_CLIENTS_SEED", "0"))  # other seeds: a reliability check by hand

WINDOW = 20
TARGET = 200.0
DQN_TIMESTEPS = 3_000  # x 8 envs = 24,000 env steps
DQN_TARGET = 100.0  # a short DQN run: well above a random policy's ~20, short of PPO's 200


def first_crossing(returns, window=WINDOW, target=TARGET):
    """Index of the first episode that ends a ``window`` whose mean return exceeds ``target``, or None."""
    for end in range(window, len(returns) + 1):
        if np.mean(returns[end - window : end]) > target:
            return end
    return None


def assert_learned(returns):
    assert len(returns) > WINDOW
    assert np.mean(returns[:WINDOW]) < 50, "a fresh policy should balance the pole for about 20 steps"
    assert first_crossing(returns) is not None, (
        f"the mean return of {WINDOW} episodes never exceeded {TARGET}; last {WINDOW}: {np.mean(returns[-WINDOW:])}"
    )


def mlp(inputs, outputs):
    return torch.nn.Sequential(
        torch.nn.Linear(inputs, 64),
        torch.nn.Tanh(),
        torch.nn.Linear(64, 64),
        torch.nn.Tanh(),
        torch.nn.Linear(64, outputs),
    )


def _sb3_ppo_on_cartpole(**make_kwargs):
    """SB3's PPO with rl-baselines3-zoo's CartPole settings on 8 kernelgym envs, stopped once learned."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback

    from kernelgym.envs.sb3 import KernelSB3VecEnv

    class Returns(BaseCallback):
        def __init__(self):
            super().__init__()
            self.returns = []

        def _on_step(self):
            self.returns += [info["episode"]["r"] for info in self.locals["infos"] if "episode" in info]
            return first_crossing(self.returns) is None  # stop once learned

    venv = KernelSB3VecEnv("CartPole-v1", 8, backend="cpu", seed=SEED, **make_kwargs)
    # rl-baselines3-zoo's CartPole PPO settings (constant rates)
    model = PPO(
        "MlpPolicy",
        venv,
        n_steps=32,
        batch_size=256,
        gae_lambda=0.8,
        gamma=0.98,
        n_epochs=20,
        ent_coef=0.0,
        learning_rate=1e-3,
        clip_range=0.2,
        seed=SEED,
        device="cpu",
    )
    callback = Returns()
    model.learn(40_000, callback=callback)
    assert_learned(callback.returns)
    assert model.num_timesteps <= 40_000 + 8 * 32
    return venv


def test_stable_baselines3_ppo_learns_cartpole():
    _sb3_ppo_on_cartpole()


def test_stable_baselines3_ppo_learns_cartpole_with_a_randomized_pole_length():
    # each env draws its pole's half length at each of its resets, on the backend
    venv = _sb3_ppo_on_cartpole(randomize={"length": (0.4, 0.6)})
    lengths = venv.env.get_params()["length"]
    assert np.all((lengths >= 0.4) & (lengths < 0.6)) and np.unique(lengths).size == 8


@functools.cache
def _skrl_ppo_returns(memory: str) -> tuple[float, ...]:
    """Episode returns of skrl's own PPO on CartPole with skrl's or kernelgym's RandomMemory.

    Cached: the learning test and the comparison of the two memories share the skrl run.
    """
    from skrl.agents.torch.ppo import PPO, PPO_CFG
    from skrl.envs.wrappers.torch import wrap_env
    from skrl.memories.torch import RandomMemory as SkrlRandomMemory
    from skrl.models.torch import CategoricalMixin, DeterministicMixin, Model
    from skrl.trainers.torch import SequentialTrainer
    from skrl.utils import set_seed

    memory_class = {"skrl": SkrlRandomMemory, "kernelgym": KernelgymRandomMemory}[memory]

    class Policy(CategoricalMixin, Model):
        def __init__(self, observation_space, action_space, device):
            Model.__init__(self, observation_space=observation_space, action_space=action_space, device=device)
            CategoricalMixin.__init__(self)
            self.net = mlp(self.num_observations, self.num_actions)

        def compute(self, inputs, role):
            return self.net(inputs["observations"]), {}

    class Value(DeterministicMixin, Model):
        def __init__(self, observation_space, action_space, device):
            Model.__init__(self, observation_space=observation_space, action_space=action_space, device=device)
            DeterministicMixin.__init__(self)
            self.net = mlp(self.num_observations, 1)

        def compute(self, inputs, role):
            return self.net(inputs["observations"]), {}

    set_seed(SEED)
    # the one-line form (the vector entry point autoresets same_step, as skrl's loop expects);
    # gymnasium's wrapper records the returns
    vector = gymnasium.make_vec("kernelgym/CartPole-v1", 16, backend="cpu", seed=SEED)
    recorded = gymnasium.wrappers.vector.RecordEpisodeStatistics(vector, buffer_length=100_000)
    env = wrap_env(recorded, verbose=False)
    rollouts = 32
    cfg = PPO_CFG(
        rollouts=rollouts,
        learning_epochs=8,
        mini_batches=4,
        discount_factor=0.99,
        gae_lambda=0.95,
        learning_rate=1e-3,
        entropy_loss_scale=0.0,
        value_loss_scale=0.5,
        time_limit_bootstrap=True,
    )
    cfg.experiment.write_interval = 0
    cfg.experiment.checkpoint_interval = 0
    models = {
        "policy": Policy(env.observation_space, env.action_space, env.device),
        "value": Value(env.observation_space, env.action_space, env.device),
    }
    agent = PPO(
        models=models,
        # kernelgym's RandomMemory unchanged, in place of skrl's
        # replacement=False is skrl's default (kernelgym's is True): given, so both sample alike
        memory=memory_class(memory_size=rollouts, num_envs=env.num_envs, device=env.device, replacement=False),
        observation_space=env.observation_space,
        action_space=env.action_space,
        device=env.device,
        cfg=cfg,
    )
    trainer = SequentialTrainer(
        env=env,
        agents=agent,
        cfg={"timesteps": 2_500, "headless": True, "disable_progressbar": True, "close_environment_at_exit": False},
    )
    trainer.train()  # 2,500 x 16 = 40,000 env steps
    env.close()
    return tuple(recorded.return_queue)


def test_skrl_ppo_learns_cartpole():
    assert_learned(list(_skrl_ppo_returns("skrl")))


def test_skrl_ppo_learns_as_well_with_kernelgym_memory():
    # same seed, and both memories draw their mini-batches with torch.randint from the global
    # generator: the runs match episode for episode
    ours, theirs = _skrl_ppo_returns("kernelgym"), _skrl_ppo_returns("skrl")
    assert_learned(list(ours))
    assert first_crossing(list(ours)) == first_crossing(list(theirs))
    assert np.mean(ours[-WINDOW:]) == np.mean(theirs[-WINDOW:])


@functools.cache
def _skrl_dqn_returns(memory: str) -> tuple[float, ...]:
    """Episode returns of skrl's own DQN (off-policy: a replay memory) on CartPole."""
    from skrl.agents.torch.dqn import DQN, DQN_CFG
    from skrl.envs.wrappers.torch import wrap_env
    from skrl.memories.torch import RandomMemory as SkrlRandomMemory
    from skrl.models.torch import DeterministicMixin, Model
    from skrl.trainers.torch import SequentialTrainer
    from skrl.utils import set_seed

    memory_class = {"skrl": SkrlRandomMemory, "kernelgym": KernelgymRandomMemory}[memory]

    class QNetwork(DeterministicMixin, Model):
        def __init__(self, observation_space, action_space, device):
            Model.__init__(self, observation_space=observation_space, action_space=action_space, device=device)
            DeterministicMixin.__init__(self)
            self.net = mlp(self.num_observations, self.num_actions)

        def compute(self, inputs, role):
            return self.net(inputs["observations"]), {}

    set_seed(SEED)
    vector = gymnasium.make_vec("kernelgym/CartPole-v1", 8, backend="cpu", seed=SEED)
    recorded = gymnasium.wrappers.vector.RecordEpisodeStatistics(vector, buffer_length=100_000)
    env = wrap_env(recorded, verbose=False)
    timesteps = DQN_TIMESTEPS
    cfg = DQN_CFG(
        batch_size=64,
        discount_factor=0.99,
        learning_rate=1e-3,
        # 800 cells before the first update: more than a batch, which kernelgym's memory
        # refuses to shrink without replacement (skrl's returns a smaller batch)
        learning_starts=100,
        target_update_interval=10,
        polyak=0.05,
        exploration_scheduler=lambda timestep, timesteps: max(0.05, 1.0 - timestep / (0.3 * timesteps)),
    )
    cfg.experiment.write_interval = 0
    cfg.experiment.checkpoint_interval = 0
    models = {
        "q_network": QNetwork(env.observation_space, env.action_space, env.device),
        "target_q_network": QNetwork(env.observation_space, env.action_space, env.device),
    }
    # skrl's exploration samples a batch of the Q-network's action space, whose generator it
    # copies: unseeded, that generator came from OS entropy and some draws never learned (CI
    # rehearsal of 2026-11-29: a mean return of 9.45). Seeded, the run repeats
    models["q_network"].action_space.seed(SEED)
    agent = DQN(
        models=models,
        # kernelgym's RandomMemory unchanged, in place of skrl's (skrl's default replacement=False given)
        memory=memory_class(memory_size=2_000, num_envs=env.num_envs, device=env.device, replacement=False),
        observation_space=env.observation_space,
        action_space=env.action_space,
        device=env.device,
        cfg=cfg,
    )
    trainer = SequentialTrainer(
        env=env,
        agents=agent,
        cfg={"timesteps": timesteps, "headless": True, "disable_progressbar": True, "close_environment_at_exit": False},
    )
    trainer.train()
    env.close()
    return tuple(recorded.return_queue)


def test_skrl_dqn_learns_as_well_with_kernelgym_memory():
    # int64 discrete actions into a replay memory sampled every step: both memories must reach
    # the same level
    for memory in ("kernelgym", "skrl"):
        returns = _skrl_dqn_returns(memory)
        assert np.mean(returns[:WINDOW]) < 50, "a fresh policy should balance the pole for about 20 steps"
        last = np.mean(returns[-WINDOW:])
        assert last > DQN_TARGET, f"DQN with {memory}'s memory: mean of the last {WINDOW} returns {last}"


def test_torchrl_ppo_learns_cartpole():
    from tensordict.nn import TensorDictModule
    from torchrl.collectors import Collector
    from torchrl.envs import GymWrapper, RewardSum, TransformedEnv
    from torchrl.modules import OneHotCategorical, ProbabilisticActor, ValueOperator
    from torchrl.objectives import ClipPPOLoss
    from torchrl.objectives.value import GAE

    torch.manual_seed(SEED)
    vector = gymnasium.make_vec("kernelgym/CartPole-v1", 16, backend="cpu", seed=SEED)  # same_step: the default
    env = TransformedEnv(GymWrapper(vector), RewardSum())
    actor = ProbabilisticActor(
        TensorDictModule(mlp(4, 2), in_keys=["observation"], out_keys=["logits"]),
        in_keys=["logits"],
        spec=env.action_spec,
        distribution_class=OneHotCategorical,
        return_log_prob=True,
    )
    value = ValueOperator(mlp(4, 1), in_keys=["observation"])
    collector = Collector(env, actor, frames_per_batch=512, total_frames=40_960, auto_register_policy_transforms=False)
    advantage = GAE(gamma=0.99, lmbda=0.95, value_network=value)
    loss = ClipPPOLoss(actor, value, clip_epsilon=0.2, entropy_coeff=0.0, critic_coeff=0.5)
    optimizer = torch.optim.Adam(loss.parameters(), lr=1e-3)
    returns = []
    for batch in collector:
        done = batch["next", "done"].squeeze(-1)
        returns += batch["next", "episode_reward"][done].squeeze(-1).tolist()
        if first_crossing(returns) is not None:
            break
        with torch.no_grad():
            advantage(batch)
        transitions = batch.reshape(-1)
        for _ in range(8):
            for indices in torch.randperm(transitions.numel()).split(128):
                losses = loss(transitions[indices])
                (losses["loss_objective"] + losses["loss_critic"] + losses["loss_entropy"]).backward()
                torch.nn.utils.clip_grad_norm_(loss.parameters(), 0.5)
                optimizer.step()
                optimizer.zero_grad()
        collector.update_policy_weights_()
    collector.shutdown()
    assert_learned(returns)


def test_stable_baselines3_ppo_learns_the_image_maze():
    # the example plugin's ImageMaze-v0: a (3, 7, 7) uint8 image, its layout a constant table
    from stable_baselines3 import PPO

    from kernelgym.envs.sb3 import KernelSB3VecEnv

    venv = KernelSB3VecEnv("ImageMaze-v0", 16, backend="cpu", seed=SEED)
    model = PPO(
        "MlpPolicy",
        venv,
        n_steps=64,
        batch_size=256,
        n_epochs=10,
        gamma=0.95,
        learning_rate=1e-3,
        seed=SEED,
        device="cpu",
    )
    before = _maze_return(model, venv)
    model.learn(30_000)
    after = _maze_return(model, venv)
    # the policy as trained (sampled): a random one scores -0.4 to -0.1 (time-outs), the trained
    # one 0.58-0.96 over seeds 0-5 (a return near 1 finds the goal directly). The greedy policy
    # is no measure: it loops into walls on one CPU and not on another (seed 0: 0.07 on an AMD
    # EPYC VM, above 0.8 where this test was written; over seeds 0-5 on that VM, -1.0 to 0.96)
    assert before < 0.0 and after > 0.5, (before, after)


def _maze_return(model, venv, episodes=64):
    """Mean return of the first ``episodes`` episodes the policy (sampling its actions) finishes."""
    returns, obs = [], venv.reset()
    while len(returns) < episodes:
        obs, _, _, infos = venv.step(model.predict(obs, deterministic=False)[0])
        returns += [info["episode"]["r"] for info in infos if "episode" in info]
    return float(np.mean(returns[:episodes]))
