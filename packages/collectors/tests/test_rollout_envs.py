"""Small deterministic envs and actors the rollout tests share (and tests of them).

CounterEnv: obs = [step in episode, episodes so far]; reward = action + 0.5; the
episode terminates after a length drawn at reset from the env's seeded generator,
and is truncated at ``limit`` steps. Every number is exact in float32, so recorded
fragments can be compared with a plain Python model bit for bit.
"""

from __future__ import annotations

import os
import signal
import time

import gymnasium as gym
import numpy as np
import torch

from kernelgym.collectors.rollout import Actor


class CounterEnv(gym.Env):
    """A gymnasium env whose records are predictable (see the module docstring)."""

    observation_space = gym.spaces.Box(0.0, 1e6, shape=(2,), dtype=np.float32)
    action_space = gym.spaces.Discrete(3)

    def __init__(self, max_len: int = 5, limit: int = 4, fault: str | None = None, fault_at: int = 3, min_len: int = 1):
        self.min_len, self.max_len, self.limit = min_len, max_len, limit
        self.fault, self.fault_at, self.n_calls = fault, fault_at, 0
        self.t = self.episodes = self.length = 0

    def _obs(self):
        return np.array([self.t, self.episodes], dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.length = 0, int(self.np_random.integers(self.min_len, self.max_len + 1))
        self.episodes += 1
        return self._obs(), {}

    def step(self, action):
        self.n_calls += 1
        if self.fault and self.n_calls >= self.fault_at:
            inject(self.fault)
        self.t += 1
        terminated = self.t >= self.length
        truncated = not terminated and self.t >= self.limit
        return self._obs(), float(action) + 0.5, terminated, truncated, {}


def inject(fault: str) -> None:
    """Misbehave as asked: raise, die by SIGKILL, or hang."""
    if fault == "raise":
        raise RuntimeError("injected failure in CounterEnv.step")
    if fault == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    if fault == "hang":
        time.sleep(3600)


def counter_factory(max_len=5, limit=4, fault=None, fault_at=3):
    """A ``factory(seed=...)`` of CounterEnvs (faults fire only in worker processes,
    never in the learner's reference env)."""

    def factory(seed=None):
        in_worker = seed is not None
        return CounterEnv(max_len, limit, fault if in_worker else None, fault_at)

    return factory


def policy(obs: torch.Tensor, bias: float) -> torch.Tensor:
    """The action PolicyActor takes: a function of the observation and its bias."""
    return (obs[..., 0] + obs[..., 1] + bias).long() % 3


class PolicyActor(Actor):
    """Deterministic feed-forward actor; ``bias`` is a parameter the learner edits."""

    def __init__(self, bias: float = 0.0):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.tensor(float(bias)), requires_grad=False)

    def step(self, stepno, obs, act, rew, fin, *, hx=None, virtual=False):
        return policy(obs, float(self.bias)), (), {"value": obs[..., 0] * 2.0}


class ConstantActor(Actor):
    """Always takes action ``action`` (reward ``action + 0.5`` in CounterEnv)."""

    def __init__(self, action: int = 2):
        super().__init__()
        self.action = action

    def step(self, stepno, obs, act, rew, fin, *, hx=None, virtual=False):
        return torch.full_like(stepno, self.action), (), {}


class CountingActor(Actor):
    """Recurrent actor whose state counts the steps since its last reset; reports it."""

    def step(self, stepno, obs, act, rew, fin, *, hx=None, virtual=False):
        if hx is None:
            hx = torch.zeros(1, obs.shape[1], 1)
        return torch.zeros_like(stepno), hx + 1, {"count": hx[0, :, 0].unsqueeze(0).clone()}


def test_counter_env_is_reproducible_and_flags_both_endings():
    runs = []
    for _ in range(2):
        env = CounterEnv(max_len=6, limit=3)
        env.reset(seed=7)
        runs.append([env.step(1)[1:4] for _ in range(20)])
    assert runs[0] == runs[1]
    env = CounterEnv(max_len=1, limit=3)
    env.reset(seed=0)
    assert env.step(0)[2:4] == (True, False)  # length 1: terminated, not truncated
    env = CounterEnv(max_len=100, limit=1)
    env.reset(seed=0)
    _, _, terminated, truncated, _ = env.step(0)
    assert (terminated, truncated) == (env.length == 1, env.length > 1)


def test_counting_actor_counts_and_resets():
    actor = CountingActor()
    zeros = torch.zeros(1, 3)
    _, hx, info = actor.step(zeros, torch.zeros(1, 3, 2), zeros, zeros, zeros, hx=None)
    assert hx.shape == (1, 3, 1) and torch.equal(info["count"], torch.zeros(1, 3))
    hx = actor.reset(hx + 4, torch.tensor([1]))
    assert hx[0, :, 0].tolist() == [5.0, 0.0, 5.0]
