"""PPO on MinAtar Breakout (CleanRL style, one file): kernelgym's vector env, collector and memory.

- ``kernelgym.envs.make("MinAtar-Breakout-v1", num_envs=64, backend="cpu")``: the game as a
  Numba kernel, every env in one call, with the original's defaults (sticky actions with
  probability 0.1; Breakout has no difficulty ramp), ``(10, 10, 4)`` bool observations.
- `kernelgym.collectors.DeviceCollector` rolls the env and the agent out into one fragment
  of ``num_steps`` transitions per env; the agent records its log-probs and values there.
- `kernelgym.memory.RandomMemory` (without replacement) holds the fragment's transitions
  with their advantages and hands out the shuffled minibatches of each PPO epoch.
- The policy and the value function are each the MinAtar paper's small network (one 3x3
  conv of 16 channels, 128 hidden units); torch runs on the cpu, on one thread.

PPO, not DQN: 64 envs give 8,192 frames per update and the network sees each frame
1 + ``update_epochs`` times in batches of 256, where DQN's one small update every few
frames (the paper's: a batch of 32 every frame) spends a 2-core CPU on per-call overhead,
for far fewer frames per second.

The score is the mean return of the last 100 episodes that ended during training (the
stochastic policy that was being trained, sticky actions on: the paper's measure), and,
after training, the mean greedy return over one episode in each of 100 fresh envs. Run it::

    NUMBA_NUM_THREADS=1 python examples/minatar_breakout_ppo.py --total-frames 2000000
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import math
import time

import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

import kernelgym.envs as kge
from kernelgym.collectors import DeviceCollector
from kernelgym.collectors.rollout.actor import Actor
from kernelgym.memory import RandomMemory

NAMES = ("obs", "actions", "log_probs", "advantages", "returns")


@dataclasses.dataclass
class Args:
    """Hyperparameters (the defaults are those of the run in packages/minatar/README.md)."""

    env_id: str = "MinAtar-Breakout-v1"
    seed: int = 1
    total_frames: int = 2_000_000  # env steps over all envs (one frame each, as the paper counts)
    num_envs: int = 64
    num_steps: int = 128  # transitions per env and fragment
    learning_rate: float = 1e-3
    anneal_lr: bool = True
    gamma: float = 0.99
    gae_lambda: float = 0.95
    num_minibatches: int = 32  # of 256: many small steps learn far faster here than few large ones
    update_epochs: int = 4
    clip_coef: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    sticky_action_prob: float = 0.1  # the env's default
    max_episode_steps: int = 0  # 0: no time limit (the original has none)
    eval_episodes: int = 100  # after training: one greedy episode in each of this many fresh envs
    eval_max_steps: int = 10_000  # an evaluation episode still running then counts its return so far
    torch_threads: int = 1
    log_every: int = 10  # updates between progress lines
    tensorboard: str | None = None  # a log directory (needs the tensorboard package)


def minatar_network(channels: int, outputs: int) -> nn.Sequential:
    """The MinAtar paper's network: a 3x3 conv of 16 channels, 128 hidden units, ``outputs``."""
    return nn.Sequential(
        nn.Conv2d(channels, 16, kernel_size=3),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(16 * 8 * 8, 128),
        nn.ReLU(),
        nn.Linear(128, outputs),
    )


class Agent(Actor):
    """A policy network and a value network, each the MinAtar paper's (no shared trunk)."""

    def __init__(self, channels: int, num_actions: int):
        super().__init__()
        # separate networks: the critic's regression gradients do not reshape the policy's features
        self.policy_net = minatar_network(channels, num_actions)
        self.value_net = minatar_network(channels, 1)
        # near-zero logits: the first policy is uniform (CleanRL's choice), not a random preference
        nn.init.orthogonal_(self.policy_net[-1].weight, gain=0.01)
        nn.init.zeros_(self.policy_net[-1].bias)

    def forward(self, obs: torch.Tensor) -> tuple[Categorical, torch.Tensor]:
        """``(..., 10, 10, C)`` bool observations -> (policy, value ``(...)``)."""
        lead = obs.shape[:-3]
        x = obs.reshape(-1, *obs.shape[-3:]).permute(0, 3, 1, 2).float()  # channels first for Conv2d
        logits = self.policy_net(x).reshape(*lead, -1)
        return Categorical(logits=logits), self.value_net(x).reshape(lead)

    def step(self, stepno, obs, act, rew, fin, *, hx=None, virtual=False):
        """Sample actions for ``1 x N`` observations; record their log-probs and the values."""
        policy, value = self(obs)
        action = policy.sample()
        return action, (), {"log_prob": policy.log_prob(action), "value": value}


def advantages_and_returns(rewards, values, episode_over, gamma: float, gae_lambda: float):
    """GAE over a fragment: ``T x N`` rewards and episode ends, ``(T + 1) x N`` values.

    Where ``episode_over[t]``, ``values[t + 1]`` belongs to the next episode: no bootstrap
    from it and no advantage flows back across (a truncated episode's bootstrap is in its
    reward already, see `store_fragment`). Returns (advantages, returns).
    """
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[0])
    for t in reversed(range(rewards.shape[0])):
        next_value = values[t + 1] * (1.0 - episode_over[t])
        delta = rewards[t] + gamma * next_value - values[t]
        running = delta + gamma * gae_lambda * (1.0 - episode_over[t]) * running
        advantages[t] = running
    return advantages, advantages + values[:-1]


@dataclasses.dataclass
class TrainLog:
    """Per update: frames so far, mean return of the last 100 episodes, losses, frames/s."""

    frames: list = dataclasses.field(default_factory=list)
    mean_returns: list = dataclasses.field(default_factory=list)
    policy_losses: list = dataclasses.field(default_factory=list)
    value_losses: list = dataclasses.field(default_factory=list)
    entropies: list = dataclasses.field(default_factory=list)
    episode_returns: list = dataclasses.field(default_factory=list)  # every finished episode, in order
    greedy_returns: list = dataclasses.field(default_factory=list)  # the evaluation after training
    frames_per_second: float = float("nan")


def make_env(args: Args, num_envs: int, seed: int):
    """The vector env on the cpu backend (same-step autoreset, as DeviceCollector needs)."""
    limit = {"max_episode_steps": args.max_episode_steps} if args.max_episode_steps > 0 else {}
    return kge.make(
        args.env_id,
        num_envs=num_envs,
        backend="cpu",
        seed=seed,
        autoreset_mode="same_step",
        sticky_action_prob=args.sticky_action_prob,
        **limit,
    )


def setup(args: Args):
    """(env, agent, optimizer, collector, memory) for ``args``."""
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    torch.set_num_threads(args.torch_threads)  # for the whole process: a small net is fastest on one
    env = make_env(args, args.num_envs, args.seed)
    obs_shape = env.single_observation_space.shape  # (10, 10, C)
    agent = Agent(obs_shape[-1], int(env.single_action_space.n)).to(env.device)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    collector = DeviceCollector(env, agent, n_steps=args.num_steps, seed=args.seed)
    memory = RandomMemory(
        memory_size=args.num_steps, num_envs=args.num_envs, device=env.device, replacement=False, seed=args.seed
    )
    memory.create_tensor("obs", obs_shape, dtype=torch.bool, keep_dimensions=True)
    memory.create_tensor("actions", 1, dtype=torch.int64)
    for name in ("log_probs", "advantages", "returns"):
        memory.create_tensor(name, 1, dtype=torch.float32)
    return env, agent, optimizer, collector, memory


def store_fragment(fragment, agent: Agent, memory: RandomMemory, args: Args) -> None:
    """The fragment's transitions with their advantages and returns, into ``memory`` (emptied first)."""
    state, recorded = fragment.state, fragment.actor
    rewards = state.rew[1:].clone()  # the fragment's own rewards stay as the env gave them
    truncated = state.truncated[1:]
    if truncated.any():  # only with a time limit (max_episode_steps): bootstrap from the true last obs
        with torch.no_grad():
            _, final_values = agent(fragment.env["final_obs"][truncated])
        rewards[truncated] += args.gamma * final_values
    advantages, returns = advantages_and_returns(
        rewards, recorded["value"], state.fin[1:].float(), args.gamma, args.gae_lambda
    )
    memory.reset()
    for t in range(args.num_steps):  # transition t: obs[t], the action act[t + 1] taken on it
        memory.add_samples(
            obs=state.obs[t],
            actions=state.act[t + 1].unsqueeze(-1),
            log_probs=recorded["log_prob"][t].unsqueeze(-1),
            advantages=advantages[t].unsqueeze(-1),
            returns=returns[t].unsqueeze(-1),
        )


def update(agent: Agent, optimizer, memory: RandomMemory, args: Args, log: TrainLog) -> None:
    """``update_epochs`` passes of clipped PPO over the memory in shuffled minibatches."""
    batch_size = args.num_envs * args.num_steps
    for _ in range(args.update_epochs):
        for obs, actions, old_log_probs, advantages, returns in memory.sample(
            NAMES, batch_size=batch_size, mini_batches=args.num_minibatches
        ):
            actions, old_log_probs, advantages, returns = (
                x.squeeze(-1) for x in (actions, old_log_probs, advantages, returns)
            )
            policy, values = agent(obs)
            log_ratio = policy.log_prob(actions) - old_log_probs
            ratio = log_ratio.exp()
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
            policy_loss = torch.max(
                -advantages * ratio, -advantages * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)
            ).mean()
            value_loss = 0.5 * (values - returns).pow(2).mean()
            entropy = policy.entropy().mean()
            loss = policy_loss + args.vf_coef * value_loss - args.ent_coef * entropy
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
            optimizer.step()
    log.policy_losses.append(policy_loss.item())
    log.value_losses.append(value_loss.item())
    log.entropies.append(entropy.item())


def evaluate(agent: Agent, args: Args) -> list[float]:
    """Greedy (argmax) returns of the first episode of each of ``eval_episodes`` fresh envs.

    Sticky actions stay on. Every env counts its first episode only (counting episodes as
    they end would favour the short ones); one still running after ``eval_max_steps``
    counts the return it has so far.
    """
    env = make_env(args, args.eval_episodes, args.seed + 1_000_003)  # seeds unlike training's
    returns = torch.zeros(args.eval_episodes)
    running = torch.ones(args.eval_episodes, dtype=torch.bool)
    try:
        obs, _ = env.reset()
        for _ in range(args.eval_max_steps):
            with torch.no_grad():
                policy, _ = agent(obs)
            obs, reward, terminated, truncated, _ = env.step(policy.probs.argmax(-1))
            returns += reward * running
            running &= ~(terminated | truncated)
            if not running.any():
                break
    finally:
        env.close()
    return returns.tolist()


def train(args: Args | None = None, writer=None, verbose: bool = False) -> TrainLog:
    """Collect fragments and update the agent until ``args.total_frames``; return the log."""
    args = Args() if args is None else args
    env, agent, optimizer, collector, memory = setup(args)
    frames_per_update = args.num_envs * args.num_steps
    num_updates = max(1, args.total_frames // frames_per_update)
    log = TrainLog()
    running_return = torch.zeros(args.num_envs)
    last_100: collections.deque = collections.deque(maxlen=100)
    start = time.perf_counter()
    try:
        for update_index in range(num_updates):
            if args.anneal_lr:
                optimizer.param_groups[0]["lr"] = args.learning_rate * (1.0 - update_index / num_updates)
            fragment = collector.collect()
            # episodic returns: rewards summed per env until its episode ends (fin)
            state = fragment.state
            for t in range(1, args.num_steps + 1):
                running_return += state.rew[t]
                ended = state.fin[t]
                if ended.any():
                    finished = running_return[ended].tolist()
                    log.episode_returns += finished
                    last_100.extend(finished)
                    running_return[ended] = 0.0
            store_fragment(fragment, agent, memory, args)
            update(agent, optimizer, memory, args, log)
            frames = (update_index + 1) * frames_per_update
            mean_return = float(np.mean(last_100)) if last_100 else float("nan")
            log.frames.append(frames)
            log.mean_returns.append(mean_return)
            log.frames_per_second = frames / (time.perf_counter() - start)
            if writer is not None:
                writer.add_scalar("charts/mean_return_last_100", mean_return, frames)
                writer.add_scalar("losses/policy", log.policy_losses[-1], frames)
                writer.add_scalar("losses/value", log.value_losses[-1], frames)
                writer.add_scalar("losses/entropy", log.entropies[-1], frames)
                writer.add_scalar("charts/frames_per_second", log.frames_per_second, frames)
            if verbose and ((update_index + 1) % args.log_every == 0 or update_index + 1 == num_updates):
                print(
                    f"frames={frames:>10,} episodes={len(log.episode_returns):>7,} "
                    f"mean_return_last_100={mean_return:6.2f} entropy={log.entropies[-1]:.3f} "
                    f"frames/s={log.frames_per_second:,.0f}",
                    flush=True,
                )
    finally:
        env.close()
    if args.eval_episodes > 0:
        log.greedy_returns = evaluate(agent, args)
    return log


def parse_args(argv: list[str] | None = None) -> Args:
    """``Args`` from the command line: one ``--flag`` per field (``--anneal-lr false`` for bools)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    for field in dataclasses.fields(Args):
        flag = "--" + field.name.replace("_", "-")
        default = field.default
        if isinstance(default, bool):
            parser.add_argument(flag, type=lambda s: s.lower() in ("1", "true", "yes"), default=default)
        elif field.name == "tensorboard":
            parser.add_argument(flag, default=None, help="write TensorBoard logs to this directory")
        else:
            parser.add_argument(flag, type=type(default), default=default)
    return Args(**vars(parser.parse_args(argv)))


def main(argv: list[str] | None = None) -> TrainLog:
    """Train from the command line; print progress and the final ``frames=... mean_return_last_100=...``."""
    args = parse_args(argv)
    writer = None
    if args.tensorboard is not None:
        from torch.utils.tensorboard import SummaryWriter  # optional: only with --tensorboard

        writer = SummaryWriter(args.tensorboard)
    start = time.perf_counter()
    try:
        log = train(args, writer=writer, verbose=True)
    finally:
        if writer is not None:
            writer.close()
    wall = time.perf_counter() - start
    final = log.mean_returns[-1] if log.mean_returns else math.nan
    greedy = float(np.mean(log.greedy_returns)) if log.greedy_returns else math.nan
    print(
        f"frames={log.frames[-1]} mean_return_last_100={final:.2f} greedy_mean_return={greedy:.2f} "
        f"episodes={len(log.episode_returns)} wall_s={wall:.0f} frames_per_s={log.frames_per_second:.0f}"
    )
    return log


if __name__ == "__main__":
    main()
