"""A recurrent (GRU) actor-critic trained with PPO over sequences, on CartPole with its
velocities hidden (a POMDP: the policy sees the cart position and the pole angle only, so it
must remember earlier observations to tell which way things move).

- `kernelgym.collectors.DeviceCollector` rolls the env and the GRU out. It carries the
  actor's recurrent state ``hx`` from step to step and fragment to fragment, and zeroes it
  for each env whose episode ended (``Actor.reset``), so a new episode starts from zero.
- `kernelgym.memory.SequenceMemory` holds a fragment's transitions and samples
  fixed-length sequences that never cross an episode boundary, with a burn-in that warms
  the recurrent state up before the trained steps.
- The update unrolls the GRU over each sequence from a zero state and takes clipped PPO
  steps on the valid, trained steps.

Run it (a minute on a laptop CPU for the default 100k env steps)::

    python examples/recurrent_ppo_gru.py --env-steps 100000
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

import kernelgym.envs as kge
from kernelgym.collectors import DeviceCollector
from kernelgym.collectors.rollout.actor import Actor
from kernelgym.memory import SequenceMemory

VISIBLE = (0, 2)  # CartPole's observation: position, velocity, angle, angular velocity
NAMES = ("obs", "actions", "log_probs", "advantages", "returns")


class GRUActorCritic(Actor):
    """Encoder, one GRU layer, and policy and value heads; ``hx`` is ``(1, B, hidden)``.

    Parameters
    ----------
    visible : sequence of int
        The observation entries the agent sees (None: all of them).
    obs_size, num_actions, hidden_size : int
    """

    def __init__(self, visible, obs_size: int, num_actions: int, hidden_size: int = 32):
        super().__init__()
        self.visible = list(range(obs_size)) if visible is None else list(visible)
        self.hidden_size = hidden_size
        self.encoder = nn.Linear(len(self.visible), hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size)
        self.policy_head = nn.Linear(hidden_size, num_actions)
        self.value_head = nn.Linear(hidden_size, 1)

    def unroll(self, obs: torch.Tensor, hx: torch.Tensor, starts: torch.Tensor):
        """Run ``T x B`` observations from the state ``hx``, zeroing it where ``starts[t]``.

        Returns
        -------
        (Categorical, values ``T x B``, the state after the last step)
        """
        features = torch.tanh(self.encoder(obs[..., self.visible]))
        outputs = []
        for t in range(features.shape[0]):
            hx = hx.masked_fill(starts[t].view(1, -1, 1), 0.0)
            output, hx = self.gru(features[t : t + 1], hx)
            outputs.append(output)
        output = torch.cat(outputs)
        return Categorical(logits=self.policy_head(output)), self.value_head(output).squeeze(-1), hx

    def step(self, stepno, obs, act, rew, fin, *, hx=None, virtual=False):
        """Sample actions for ``1 x B`` observations; keep their log-prob, value and the state's size."""
        if hx is None:
            hx = torch.zeros(1, obs.shape[1], self.hidden_size, device=obs.device)
        # the size of the state the collector handed in: zero where an episode starts
        info = {"hx_norm": hx.norm(dim=-1)}
        policy, value, next_hx = self.unroll(obs, hx, fin)
        action = policy.sample()
        info.update(log_prob=policy.log_prob(action), value=value)
        return action, next_hx, info


def advantages_and_returns(rewards, values, episode_over, gamma: float, gae_lambda: float):
    """GAE over a fragment: ``T x B`` rewards, ``(T + 1) x B`` values; nothing flows across an
    episode's end. Returns (advantages, returns)."""
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[0])
    for t in reversed(range(rewards.shape[0])):
        going_on = 1.0 - episode_over[t]
        delta = rewards[t] + gamma * values[t + 1] * going_on - values[t]
        running = delta + gamma * gae_lambda * going_on * running
        advantages[t] = running
    return advantages, advantages + values[:-1]


def run_starts(valid: torch.Tensor) -> torch.Tensor:
    """``T x S`` masks -> where the recurrent state restarts: at each step after an invalid one."""
    before = torch.cat([torch.zeros_like(valid[:1]), valid[:-1]])
    return ~before


@dataclasses.dataclass
class Config:
    """Hyperparameters of `train` (small: the example is about the plumbing)."""

    seed: int = 0
    num_envs: int = 16
    n_steps: int = 32  # transitions per fragment and env
    env_steps: int = 100_000
    hidden_size: int = 32
    sequence_length: int = 8
    burn_in: int = 4
    sequences: int = 128  # per epoch
    mini_batches: int = 4
    epochs: int = 4
    learning_rate: float = 3e-3
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip: float = 0.2
    value_coef: float = 0.5
    entropy_coef: float = 0.01
    mask_velocities: bool = True
    torch_threads: int = 1  # a model this small runs fastest on one thread (50x on a busy 2-core machine)


@dataclasses.dataclass
class TrainLog:
    """Per fragment: the env steps so far and the mean return of the episodes it ended;
    per minibatch: the losses."""

    env_steps: list = dataclasses.field(default_factory=list)
    episode_returns: list = dataclasses.field(default_factory=list)
    policy_losses: list = dataclasses.field(default_factory=list)
    value_losses: list = dataclasses.field(default_factory=list)


def make_memory(config: Config, obs_size: int, device) -> SequenceMemory:
    """A memory for one fragment; its ``terminated``/``truncated`` tensors mark episode ends."""
    memory = SequenceMemory(
        memory_size=config.n_steps,
        num_envs=config.num_envs,
        device=device,
        sequence_length=config.sequence_length,
        burn_in=config.burn_in,
        seed=config.seed,
    )
    memory.create_tensor("obs", obs_size, dtype=torch.float32)
    memory.create_tensor("actions", 1, dtype=torch.int64)
    for name in ("log_probs", "advantages", "returns"):
        memory.create_tensor(name, 1, dtype=torch.float32)
    for name in ("terminated", "truncated"):
        memory.create_tensor(name, 1, dtype=torch.bool)
    return memory


def store_fragment(fragment, memory: SequenceMemory, config: Config) -> torch.Tensor:
    """Advantages for the fragment, its transitions into ``memory``; return the rewards (``T x B``)."""
    state, info = fragment.state, fragment.actor
    rewards = state.rew[1:].float()
    terminated, truncated = state.terminated[1:], state.truncated[1:]
    episode_over = state.fin[1:].float()
    # a truncated episode would bootstrap from its final observation, which needs the state
    # the GRU had there; CartPole's 500-step limit is rare in a short run: bootstrap from 0
    advantages, returns = advantages_and_returns(rewards, info["value"], episode_over, config.gamma, config.gae_lambda)
    memory.reset()
    for t in range(config.n_steps):
        memory.add_samples(
            obs=state.obs[t],
            actions=state.act[t + 1].unsqueeze(-1),
            log_probs=info["log_prob"][t].unsqueeze(-1),
            advantages=advantages[t].unsqueeze(-1),
            returns=returns[t].unsqueeze(-1),
            terminated=terminated[t].unsqueeze(-1),
            truncated=truncated[t].unsqueeze(-1),
        )
    return rewards


def update(agent: GRUActorCritic, optimizer, memory: SequenceMemory, config: Config, log: TrainLog) -> None:
    """PPO epochs over sequences sampled from ``memory``; losses go to ``log``."""
    for _ in range(config.epochs):
        batches = memory.sample(NAMES, batch_size=config.sequences, mini_batches=config.mini_batches)
        for obs, actions, old_log_probs, advantages, returns, valid in batches:
            # (S, burn_in + L, ...) -> time first, as the GRU runs
            obs, valid = obs.transpose(0, 1), valid.transpose(0, 1)
            actions, old_log_probs, advantages, returns = (
                x.squeeze(-1).transpose(0, 1) for x in (actions, old_log_probs, advantages, returns)
            )
            hx = torch.zeros(1, obs.shape[1], agent.hidden_size, device=obs.device)
            policy, values, _ = agent.unroll(obs, hx, run_starts(valid))
            trained = valid.clone()
            trained[: config.burn_in] = False  # the burn-in only warms the state up
            weight = trained.float() / trained.sum().clamp(min=1)
            adv = advantages[trained]
            advantages = (advantages - adv.mean()) / (adv.std() + 1e-8) if adv.numel() > 1 else advantages
            ratio = (policy.log_prob(actions) - old_log_probs).exp()
            clipped = ratio.clamp(1 - config.clip, 1 + config.clip)
            policy_loss = (torch.max(-advantages * ratio, -advantages * clipped) * weight).sum()
            value_loss = (0.5 * (values - returns).pow(2) * weight).sum()
            entropy = (policy.entropy() * weight).sum()
            loss = policy_loss + config.value_coef * value_loss - config.entropy_coef * entropy
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
            optimizer.step()
            log.policy_losses.append(policy_loss.item())
            log.value_losses.append(value_loss.item())


def setup(config: Config):
    """(env, agent, optimizer, collector, memory) for ``config``."""
    torch.manual_seed(config.seed)
    torch.set_num_threads(config.torch_threads)  # for the whole process
    env = kge.make("CartPole-v1", num_envs=config.num_envs, backend="cpu", seed=config.seed, autoreset_mode="same_step")
    obs_size = env.single_observation_space.shape[0]
    agent = GRUActorCritic(
        VISIBLE if config.mask_velocities else None, obs_size, int(env.single_action_space.n), config.hidden_size
    ).to(env.device)
    optimizer = torch.optim.Adam(agent.parameters(), lr=config.learning_rate)
    collector = DeviceCollector(env, agent, n_steps=config.n_steps, seed=config.seed)
    return env, agent, optimizer, collector, make_memory(config, obs_size, env.device)


def train(config: Config | None = None) -> TrainLog:
    """Collect fragments and update the agent until ``config.env_steps`` (default `Config`); return the log."""
    config = Config() if config is None else config
    env, agent, optimizer, collector, memory = setup(config)
    log = TrainLog()
    episode_return = torch.zeros(config.num_envs)
    steps = 0
    try:
        while steps < config.env_steps:
            fragment = collector.collect()
            rewards = store_fragment(fragment, memory, config)
            finished = []
            for t in range(config.n_steps):
                episode_return += rewards[t]
                ended = fragment.state.fin[t + 1]
                finished += episode_return[ended].tolist()
                episode_return[ended] = 0.0
            update(agent, optimizer, memory, config, log)
            steps += config.n_steps * config.num_envs
            log.env_steps.append(steps)
            log.episode_returns.append(float(np.mean(finished)) if finished else float("nan"))
    finally:
        env.close()
    return log


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="PPO with a GRU actor-critic on CartPole without velocities")
    parser.add_argument("--env-steps", type=int, default=Config.env_steps)
    parser.add_argument("--seed", type=int, default=Config.seed)
    parser.add_argument("--full-observation", action="store_true", help="show the velocities too (an MDP)")
    options = parser.parse_args(argv)
    config = Config(seed=options.seed, env_steps=options.env_steps, mask_velocities=not options.full_observation)
    log = train(config)
    every = max(1, len(log.env_steps) // 10)
    for steps, mean_return in list(zip(log.env_steps, log.episode_returns))[::every]:
        print(f"{steps:>8,} env steps: mean episode return {mean_return:.1f}")


if __name__ == "__main__":
    main()
