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

Written for a GPU: nothing in a fragment's collection, its advantages or an update epoch
reads a tensor value on the host (a read waits for the device). The distributions skip
their argument checks (each one is a host read), the episode returns and the learning
statistics stay on the device, and one read per iteration brings them back. On cuda the
collector replays its fragment as one captured CUDA graph.
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

import kernelgym.envs as kge
from kernelgym.cli.demo_progress import ReturnProgress
from kernelgym.collectors.device_collector import DeviceCollector
from kernelgym.collectors.rollout import Actor
from kernelgym.core import resolve_backend
from kernelgym.memory import RandomMemory

__all__ = [
    "PPOConfig",
    "TrainResult",
    "PPOAgent",
    "choose_num_envs",
    "compute_gae",
    "episode_returns",
    "learn_from_fragment",
    "make_memory",
    "make_optimizer",
    "train",
    "update_epoch",
]

#: the env count on a GPU: per streaming multiprocessor, and its bounds (see `choose_num_envs`)
ENVS_PER_SM = 2
GPU_NUM_ENVS = (64, 256)


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
    """The learning curve (one point per rollout), how the run ended, and the agent.

    ``wall_s`` counts from the first fragment on. ``compile_s`` is the time before it
    (making the env: compiling or loading its kernels; the collector's first reset), and
    ``warmup_s`` the first iteration's share of ``wall_s``: first launches, torch's lazy
    setup, and on cuda the capture of the fragment's graph.
    """

    config: PPOConfig
    backend: str
    agent: PPOAgent
    env_steps: list[int] = dataclasses.field(default_factory=list)
    wall_s: list[float] = dataclasses.field(default_factory=list)
    mean_returns: list[float] = dataclasses.field(default_factory=list)
    reached_target: bool = False
    compile_s: float = 0.0
    warmup_s: float = 0.0
    captured: bool = False

    @property
    def training_s(self) -> float:
        """Seconds of training after the warm-up (the first iteration)."""
        return self.wall_time_s - self.warmup_s

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
        # no argument checks: each is a host read (a sync on cuda) that a CUDA graph cannot hold
        return Categorical(logits=self.actor(obs), validate_args=False)

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
    # every row's delta and decay at once (the same operations per element as a row at a
    # time, so the same bits); only the backward recursion is left to the loop
    deltas = rewards + gamma * next_values * (1.0 - terminated) - values
    decays = gamma * gae_lambda * (1.0 - episode_over)
    advantages = torch.empty_like(rewards)
    running = torch.zeros_like(rewards[0])
    for t in reversed(range(len(rewards))):
        running = torch.add(deltas[t], decays[t] * running, out=advantages[t])
    return advantages


def episode_returns(rewards: torch.Tensor, episode_over: torch.Tensor, running: torch.Tensor) -> torch.Tensor:
    """The return of each episode that ends in a fragment, on the device.

    Parameters
    ----------
    rewards, episode_over : float tensors, ``T x N``
        ``r_{t+1}``, and 1 where the step ended the episode.
    running : float tensor, ``N``
        Each env's return so far in its current episode; updated in place to the
        partial return at the fragment's end.

    Returns
    -------
    ``T x N`` tensor: the episode's return where it ended, NaN elsewhere.
    """
    steps = len(rewards)
    # each env's rewards since its carried episode began: a product with a lower-triangular
    # matrix of ones, not cumsum, which torch's deterministic mode (train's) refuses on cuda
    lower = torch.ones(steps, steps, dtype=rewards.dtype, device=rewards.device).tril_()
    totals = running + lower @ rewards
    ended = episode_over.bool()
    rows = torch.arange(steps, device=rewards.device).unsqueeze(1).expand_as(ended)
    # the last row, at or before t, at which an episode ended (-1: none in this fragment)
    last_end = torch.where(ended, rows, -1).cummax(0).values
    before = torch.cat([torch.full_like(last_end[:1], -1), last_end[:-1]])
    # an episode's return is the total at its end minus the total at the previous end
    start = torch.where(before >= 0, totals.gather(0, before.clamp(min=0)), 0.0)
    finished = torch.where(ended, totals - start, float("nan"))
    tail = last_end[-1]
    running.copy_(totals[-1] - torch.where(tail >= 0, totals.gather(0, tail.clamp(min=0).unsqueeze(0))[0], 0.0))
    return finished


MEMORY_NAMES = ("obs", "actions", "log_probs", "advantages", "returns")


def make_memory(num_steps: int, num_envs: int, obs_size: int, device, seed: int) -> RandomMemory:
    """The memory one fragment's transitions go into, sampled without replacement."""
    memory = RandomMemory(memory_size=num_steps, num_envs=num_envs, device=device, replacement=False, seed=seed)
    memory.create_tensor("obs", obs_size, dtype=torch.float32)
    memory.create_tensor("actions", 1, dtype=torch.int64)
    memory.create_tensor("log_probs", 1, dtype=torch.float32)
    memory.create_tensor("advantages", 1, dtype=torch.float32)
    memory.create_tensor("returns", 1, dtype=torch.float32)
    return memory


def learn_from_fragment(fragment, agent: PPOAgent, memory: RandomMemory, config: PPOConfig) -> None:
    """Advantages and returns of a fragment's transitions, written with them into ``memory``."""
    # state[t] is x_t, and a_t, r_{t+1}, ... are at t + 1
    state = fragment.state
    T, N = config.num_steps, config.num_envs
    rewards, terminated, episode_over = state.rew[1:].float(), state.terminated[1:].float(), state.fin[1:].float()
    log_probs, values = fragment.actor["log_prob"][:-1], fragment.actor["value"]
    # bootstrap from the next observation, or from the final one when the episode ended
    # (a terminated episode has no future: GAE masks it)
    with torch.no_grad():
        next_values = torch.where(state.fin[1:], agent.value(fragment.env["final_obs"]), values[1:])
        advantages = compute_gae(
            rewards, values[:-1], next_values, terminated, episode_over, config.gamma, config.gae_lambda
        )
        returns = advantages + values[:-1]
    # the whole fragment in one call, row t env n at cell t * N + n (copies: the collector
    # overwrites the fragment in place next round)
    memory.reset()
    memory.add_samples(
        obs=state.obs[:-1].reshape(T * N, -1),
        actions=state.act[1:].reshape(T * N, 1),
        log_probs=log_probs.reshape(T * N, 1),
        advantages=advantages.reshape(T * N, 1),
        returns=returns.reshape(T * N, 1),
    )


def make_optimizer(agent: PPOAgent, config: PPOConfig) -> torch.optim.Adam:
    """The demo's Adam, fused: one kernel updates every parameter, with no host read (torch's
    default Adam reads each parameter's step count with ``.item()`` at every step, on cuda too)."""
    return torch.optim.Adam(agent.parameters(), lr=config.learning_rate, eps=1e-5, fused=True)


def update_epoch(agent: PPOAgent, optimizer: torch.optim.Optimizer, memory: RandomMemory, config: PPOConfig):
    """One PPO epoch over shuffled minibatches of ``memory``.

    Returns
    -------
    ``(3,)`` tensor: the last minibatch's policy, value and entropy losses (on the device, detached).
    """
    batches = memory.sample(
        MEMORY_NAMES, batch_size=config.num_steps * config.num_envs, mini_batches=config.num_minibatches
    )
    for mb_obs, mb_actions, mb_log_probs, mb_advantages, mb_returns in batches:
        policy = agent.policy(mb_obs)
        new_log_probs = policy.log_prob(mb_actions.squeeze(-1))
        ratio = (new_log_probs - mb_log_probs.squeeze(-1)).exp()
        adv = mb_advantages.squeeze(-1)
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        policy_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - config.clip_coef, 1 + config.clip_coef)).mean()
        value_loss = 0.5 * (agent.value(mb_obs) - mb_returns.squeeze(-1)).pow(2).mean()
        entropy = policy.entropy().mean()
        loss = policy_loss - config.ent_coef * entropy + config.vf_coef * value_loss
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(agent.parameters(), config.max_grad_norm)
        optimizer.step()
    return torch.stack([policy_loss, value_loss, entropy]).detach()


def choose_num_envs(device: torch.device) -> tuple[int, str]:
    """The demo's env count for a CUDA device, and why.

    A fragment and an update cost a GPU about the same time at a few hundred envs as at
    64 (the host's launches set the pace), so more envs per fragment are nearly free; but
    with PPO's fixed 4 minibatches and 4 epochs, a larger batch means fewer updates per env
    step. On CartPole (seed 1, cpu) 64 envs reached the target in 73 iterations, 256
    in 61 (1 M env steps), and 1,024 not within the 3 M env-step budget. So: ``ENVS_PER_SM``
    envs per streaming multiprocessor, down to a power of two, within ``GPU_NUM_ENVS``.
    """
    properties = torch.cuda.get_device_properties(device)
    sms = properties.multi_processor_count
    low, high = GPU_NUM_ENVS
    count = min(high, max(low, 1 << ((sms * ENVS_PER_SM).bit_length() - 1)))
    return count, (
        f"{properties.name} has {sms} SMs: {ENVS_PER_SM} envs per SM, down to a power of two, "
        f"within {low}-{high} (more envs per update cost PPO more env steps)"
    )


# ------------------------------------------------------------------------- training
def train(config: PPOConfig = PPOConfig(), progress: bool = True, tensorboard_dir: str | None = None) -> TrainResult:
    """Train a PPO agent until the target return, the step budget or the time limit.

    Parameters
    ----------
    config : PPOConfig
    progress : bool
        Show a progress bar filled by the mean return toward the target, with an ETA (the
        earliest stopping rule's), the env steps and env-steps/s (`kernelgym.cli.demo_progress`).
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

    compile_start = time.perf_counter()
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
    optimizer = make_optimizer(agent, config)
    # on cuda each fragment after the first replays one captured CUDA graph
    collector = DeviceCollector(env, agent, n_steps=config.num_steps, seed=config.seed, capture=backend == "cuda")
    T, N = config.num_steps, config.num_envs
    memory = make_memory(T, N, obs_space.shape[0], device, config.seed)

    result = TrainResult(config=config, backend=backend, agent=agent)
    result.compile_s = time.perf_counter() - compile_start
    running_return = torch.zeros(N, device=device)
    recent_returns: deque[float] = deque(maxlen=config.return_window)
    env_steps = 0
    # the bar fills with the mean return toward the target, the rule a learning run stops on
    bar = ReturnProgress(
        config.target_return,
        config.return_window,
        config.max_env_steps,
        config.time_limit_s,
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
            # --- 1. episode returns for the learning curve, advantages into the memory
            state = fragment.state
            finished = episode_returns(state.rew[1:].float(), state.fin[1:].float(), running_return)
            learn_from_fragment(fragment, agent, memory, config)

            # --- 2. PPO update: several epochs over shuffled minibatches
            for _ in range(config.update_epochs):
                losses = update_epoch(agent, optimizer, memory, config)

            # --- 3. the iteration's one host read: finished returns and the last losses
            stats = torch.cat([finished.flatten(), losses]).tolist()
            returns = np.array(stats[:-3])
            recent_returns.extend(returns[~np.isnan(returns)].tolist())
            policy_loss, value_loss, entropy = stats[-3:]

            # --- 4. the learning curve, the progress bar, and when to stop
            env_steps += T * N
            elapsed = time.perf_counter() - start
            if not result.wall_s:
                result.warmup_s = elapsed
                result.captured = collector.captured
            mean_return = float(np.mean(recent_returns)) if recent_returns else 0.0
            result.env_steps.append(env_steps)
            result.wall_s.append(elapsed)
            result.mean_returns.append(mean_return)
            bar.update(mean_return, len(recent_returns), env_steps, elapsed)
            if writer is not None:
                scalars = {
                    "charts/mean_return": mean_return,
                    "charts/env_steps_per_s": env_steps / elapsed,
                    "losses/policy": policy_loss,
                    "losses/value": value_loss,
                    "losses/entropy": entropy,
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
        bar.finish(result.reached_target)
        env.close()
        if writer is not None:
            writer.close()
    return result
