"""PPO on a kernelgym vector env, in one file to read top to bottom (CleanRL style).

The env steps as Numba kernels (on the GPU, or compiled for the CPU), the
`DeviceCollector` writes each rollout fragment in place on ``env.device``, the
fragment's transitions go into a kernelgym `RandomMemory`, and minibatches sampled
from it train a small actor-critic MLP. Everything stays on one device.

Run it with ``kernelgym demo`` (see ``kernelgym demo --help``), or from Python::

    from kernelgym.cli.ppo import PPOConfig, train
    result = train(PPOConfig(seed=1))
    print(result.final_return, result.wall_time_s)

Episodes auto-reset on the same step (gymnasium's ``SAME_STEP``): after a transition
that ends an episode the fragment already holds the reset observation and keeps the
true final observation in ``fragment.env["final_obs"]``, from which a truncated
(time-limit) episode is bootstrapped.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections import deque

import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical
from tqdm import tqdm

import kernelgym.envs as kge
from kernelgym.collectors.device_collector import DeviceCollector
from kernelgym.collectors.rollout import Actor
from kernelgym.core import resolve_backend
from kernelgym.memory import RandomMemory

__all__ = ["PPOConfig", "TrainResult", "PPOAgent", "compute_gae", "train"]


# ----------------------------------------------------------------------------- config
@dataclasses.dataclass(frozen=True)
class PPOConfig:
    """Everything a run depends on; the defaults solve CartPole-v1 on a 2-core CPU.

    Parameters
    ----------
    env_id : str
        A registered kernelgym env with a ``Box`` observation and ``Discrete`` action.
    seed : int
        Seeds the env, torch and the memory's sampling: same seed, same returns.
    backend : str
        ``"auto"`` (cuda when a GPU is usable, else cpu), ``"cuda"``, ``"cpu"``.
    num_envs, num_steps : int
        Envs stepped in parallel, and steps per env in one rollout fragment.
    learning_rate, gamma, gae_lambda, update_epochs, num_minibatches, clip_coef,
    ent_coef, vf_coef, max_grad_norm, hidden_size :
        The usual PPO hyperparameters (CleanRL's names).
    target_return : float
        Stop as soon as the mean return of the last ``return_window`` episodes
        reaches it.
    max_env_steps : int
        Stop after this many env steps (summed over envs).
    time_limit_s : float
        Stop after this many seconds of training.
    torch_threads : int
        Threads for torch's CPU kernels. One: the MLP is too small to gain from more,
        and a second OpenMP team spinning beside Numba's env threads slowed a shared
        2-core machine down tenfold.
    """

    env_id: str = "CartPole-v1"
    seed: int = 1
    backend: str = "auto"
    num_envs: int = 64
    num_steps: int = 64
    learning_rate: float = 1e-3
    gamma: float = 0.99
    gae_lambda: float = 0.95
    update_epochs: int = 4
    num_minibatches: int = 4
    clip_coef: float = 0.2
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    hidden_size: int = 64
    target_return: float = 475.0
    return_window: int = 100
    max_env_steps: int = 3_000_000
    time_limit_s: float = 300.0
    torch_threads: int = 1

    def __post_init__(self):
        for name in (
            "num_envs",
            "num_steps",
            "update_epochs",
            "num_minibatches",
            "hidden_size",
            "return_window",
            "max_env_steps",
            "torch_threads",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"PPOConfig {name}: expected an int >= 1, received {value!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"PPOConfig seed: expected an int >= 0, received {self.seed!r}")
        for name in ("learning_rate", "time_limit_s"):
            value = getattr(self, name)
            if not value > 0:
                raise ValueError(f"PPOConfig {name}: expected a number > 0, received {value!r}")
        for name in ("gamma", "gae_lambda"):
            value = getattr(self, name)
            if not 0 <= value <= 1:
                raise ValueError(f"PPOConfig {name}: expected a number in [0, 1], received {value!r}")
        batch = self.num_envs * self.num_steps
        if batch % self.num_minibatches:
            raise ValueError(
                f"PPOConfig num_minibatches: expected a divisor of num_envs * num_steps = {batch}, "
                f"received {self.num_minibatches}"
            )


@dataclasses.dataclass
class TrainResult:
    """The learning curve (one point per rollout), how the run ended, and the agent."""

    config: PPOConfig
    backend: str
    agent: PPOAgent
    env_steps: list[int] = dataclasses.field(default_factory=list)
    wall_s: list[float] = dataclasses.field(default_factory=list)
    mean_returns: list[float] = dataclasses.field(default_factory=list)
    reached_target: bool = False

    @property
    def final_return(self) -> float:
        return self.mean_returns[-1] if self.mean_returns else float("nan")

    @property
    def wall_time_s(self) -> float:
        return self.wall_s[-1] if self.wall_s else 0.0

    @property
    def total_env_steps(self) -> int:
        return self.env_steps[-1] if self.env_steps else 0

    @property
    def steps_per_s(self) -> float:
        return self.total_env_steps / self.wall_time_s if self.wall_time_s else 0.0


# ------------------------------------------------------------------------------ agent
def layer(in_features: int, out_features: int, std: float = np.sqrt(2)) -> nn.Linear:
    """A linear layer with orthogonal weights and zero bias (PPO's usual init)."""
    linear = nn.Linear(in_features, out_features)
    nn.init.orthogonal_(linear.weight, std)
    nn.init.zeros_(linear.bias)
    return linear


class PPOAgent(Actor):
    """An actor-critic MLP (two tanh hidden layers each) that the collector drives."""

    def __init__(self, obs_size: int, num_actions: int, hidden_size: int):
        super().__init__()
        self.critic = nn.Sequential(
            layer(obs_size, hidden_size),
            nn.Tanh(),
            layer(hidden_size, hidden_size),
            nn.Tanh(),
            layer(hidden_size, 1, std=1.0),
        )
        self.actor = nn.Sequential(
            layer(obs_size, hidden_size),
            nn.Tanh(),
            layer(hidden_size, hidden_size),
            nn.Tanh(),
            layer(hidden_size, num_actions, std=0.01),  # near-uniform first policy
        )

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(obs).squeeze(-1)

    def policy(self, obs: torch.Tensor) -> Categorical:
        return Categorical(logits=self.actor(obs))

    @torch.no_grad()
    def step(self, stepno, obs, act, rew, fin, *, hx=None, virtual=False):
        """Sample actions for ``T x B`` observations; keep their log-prob and value."""
        policy = self.policy(obs)
        action = policy.sample()
        info = {"log_prob": policy.log_prob(action), "value": self.value(obs)}
        return action, (), info


# ------------------------------------------------------------------------ advantages
def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_values: torch.Tensor,
    terminated: torch.Tensor,
    episode_over: torch.Tensor,
    gamma: float,
    gae_lambda: float,
) -> torch.Tensor:
    """Generalized advantage estimates of ``T x N`` transitions.

    Parameters
    ----------
    rewards, values, next_values : float tensors, ``T x N``
        ``r_{t+1}``, ``V(x_t)`` and the value of the observation the step led to
        (the final observation when the episode ended there).
    terminated, episode_over : float tensors (0 or 1), ``T x N``
        The step reached a terminal state (no bootstrapping), or ended the episode
        for any reason (the next row starts a new episode, so no advantage flows back).
    gamma, gae_lambda : float

    Returns
    -------
    advantages : ``T x N`` tensor
    """
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[0])
    for t in reversed(range(len(rewards))):
        delta = rewards[t] + gamma * next_values[t] * (1.0 - terminated[t]) - values[t]
        running = delta + gamma * gae_lambda * (1.0 - episode_over[t]) * running
        advantages[t] = running
    return advantages


# ------------------------------------------------------------------------- training
def train(config: PPOConfig = PPOConfig(), progress: bool = True, tensorboard_dir: str | None = None) -> TrainResult:
    """Train a PPO agent until the target return, the step budget or the time limit.

    Parameters
    ----------
    config : PPOConfig
    progress : bool
        Show a tqdm bar with the mean return and env-steps/s.
    tensorboard_dir : str, optional
        Also write TensorBoard scalars there, one point per fragment at its env-step count:
        ``charts/mean_return``, ``charts/env_steps_per_s`` and the last minibatch's
        ``losses/policy``, ``losses/value`` and ``losses/entropy`` (needs the tensorboard
        package: ``pip install "kernelgym[tensorboard]"``).

    Returns
    -------
    TrainResult

    Notes
    -----
    For reproducible runs this switches torch's deterministic algorithms on and sets
    its CPU thread count, for the whole process.
    """
    # --- reproducibility: same seed, same threads -> same numbers
    backend = resolve_backend(config.backend)
    if backend == "cuda":
        # deterministic cuBLAS needs a fixed workspace, chosen before its first use
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.manual_seed(config.seed)
    torch.set_num_threads(config.torch_threads)
    torch.use_deterministic_algorithms(True)

    env = kge.make(
        config.env_id, num_envs=config.num_envs, backend=backend, seed=config.seed, autoreset_mode="same_step"
    )
    obs_space, action_space = env.single_observation_space, env.single_action_space
    if env.num_agents != 1 or len(obs_space.shape) != 1 or not hasattr(action_space, "n"):
        env.close()
        raise ValueError(
            f"PPOConfig env_id: expected a single-agent env with a flat Box observation and a "
            f"Discrete action, received {config.env_id!r} ({env.num_agents} agents, "
            f"{obs_space}, {action_space})"
        )
    device = env.device
    agent = PPOAgent(obs_space.shape[0], int(action_space.n), config.hidden_size).to(device)
    optimizer = torch.optim.Adam(agent.parameters(), lr=config.learning_rate, eps=1e-5)
    collector = DeviceCollector(env, agent, n_steps=config.num_steps, seed=config.seed)

    # --- the transitions of one fragment, (num_steps, num_envs, ...) on the env's device
    T, N = config.num_steps, config.num_envs
    memory = RandomMemory(memory_size=T, num_envs=N, device=device, replacement=False, seed=config.seed)
    memory.create_tensor("obs", obs_space.shape[0], dtype=torch.float32)
    memory.create_tensor("actions", 1, dtype=torch.int64)
    memory.create_tensor("log_probs", 1, dtype=torch.float32)
    memory.create_tensor("advantages", 1, dtype=torch.float32)
    memory.create_tensor("returns", 1, dtype=torch.float32)
    names = ("obs", "actions", "log_probs", "advantages", "returns")

    result = TrainResult(config=config, backend=backend, agent=agent)
    episode_return = torch.zeros(N, device=device)
    recent_returns: deque[float] = deque(maxlen=config.return_window)
    env_steps = 0
    bar = tqdm(
        total=config.max_env_steps,
        unit="step",
        unit_scale=True,
        disable=not progress,
        desc=f"PPO {config.env_id} [{backend}]",
    )
    writer = None
    if tensorboard_dir is not None:
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(tensorboard_dir)
    start = time.perf_counter()
    try:
        for fragment in collector:
            # --- 1. read the fragment: state[t] is x_t, and a_t, r_{t+1}, ... are at t + 1
            state = fragment.state
            obs, final_obs = state.obs, fragment.env["final_obs"]
            actions = state.act[1:]
            rewards = state.rew[1:].float()
            terminated = state.terminated[1:].float()
            episode_over = state.fin[1:].float()
            log_probs, values = fragment.actor["log_prob"][:-1], fragment.actor["value"]

            # --- 2. episode returns for the learning curve (one host transfer per fragment)
            finished_returns = torch.full_like(rewards, float("nan"))
            for t in range(T):
                episode_return += rewards[t]
                finished_returns[t] = torch.where(state.fin[t + 1], episode_return, float("nan"))
                episode_return *= 1.0 - episode_over[t]
            finished_returns = finished_returns.flatten().cpu().numpy()
            recent_returns.extend(finished_returns[~np.isnan(finished_returns)].tolist())

            # --- 3. advantages: bootstrap from the next observation, or from the final one
            # when the episode ended (a terminated episode has no future: GAE masks it)
            with torch.no_grad():
                next_values = torch.where(episode_over.bool(), agent.value(final_obs), values[1:])
                advantages = compute_gae(
                    rewards, values[:-1], next_values, terminated, episode_over, config.gamma, config.gae_lambda
                )
                returns = advantages + values[:-1]

            # --- 4. store the fragment's transitions in the memory (copies: the
            # collector overwrites the fragment in place next round)
            memory.reset()
            for t in range(T):
                memory.add_samples(
                    obs=obs[t],
                    actions=actions[t].unsqueeze(-1),
                    log_probs=log_probs[t].unsqueeze(-1),
                    advantages=advantages[t].unsqueeze(-1),
                    returns=returns[t].unsqueeze(-1),
                )

            # --- 5. PPO update: several epochs over shuffled minibatches
            for _ in range(config.update_epochs):
                batches = memory.sample(names, batch_size=T * N, mini_batches=config.num_minibatches)
                for mb_obs, mb_actions, mb_log_probs, mb_advantages, mb_returns in batches:
                    policy = agent.policy(mb_obs)
                    new_log_probs = policy.log_prob(mb_actions.squeeze(-1))
                    ratio = (new_log_probs - mb_log_probs.squeeze(-1)).exp()
                    adv = mb_advantages.squeeze(-1)
                    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                    policy_loss = torch.max(
                        -adv * ratio, -adv * ratio.clamp(1 - config.clip_coef, 1 + config.clip_coef)
                    ).mean()
                    value_loss = 0.5 * (agent.value(mb_obs) - mb_returns.squeeze(-1)).pow(2).mean()
                    entropy = policy.entropy().mean()
                    loss = policy_loss - config.ent_coef * entropy + config.vf_coef * value_loss
                    optimizer.zero_grad()
                    loss.backward()
                    nn.utils.clip_grad_norm_(agent.parameters(), config.max_grad_norm)
                    optimizer.step()

            # --- 6. the learning curve, the progress bar, and when to stop
            env_steps += T * N
            elapsed = time.perf_counter() - start
            mean_return = float(np.mean(recent_returns)) if recent_returns else 0.0
            result.env_steps.append(env_steps)
            result.wall_s.append(elapsed)
            result.mean_returns.append(mean_return)
            bar.update(T * N)
            bar.set_postfix(mean_return=f"{mean_return:.1f}", steps_per_s=f"{env_steps / elapsed:,.0f}")
            if writer is not None:
                scalars = {
                    "charts/mean_return": mean_return,
                    "charts/env_steps_per_s": env_steps / elapsed,
                    "losses/policy": policy_loss.item(),
                    "losses/value": value_loss.item(),
                    "losses/entropy": entropy.item(),
                }
                for tag, value in scalars.items():
                    writer.add_scalar(tag, value, env_steps)
            full_window = len(recent_returns) == config.return_window
            if full_window and mean_return >= config.target_return:
                result.reached_target = True
                break
            if env_steps >= config.max_env_steps or elapsed >= config.time_limit_s:
                break
    finally:
        bar.close()
        env.close()
        if writer is not None:
            writer.close()
    return result
