"""No silent freeze: a bad action raises by the end of its fragment, with one fault read per fragment.

With the env's ``"deferred"`` action check (the cuda and sim default; the simulator runs the same
kernels) the env that got a bad action does not step and nothing synchronizes per step;
before this, ``DeviceCollector`` went on collecting fragments of a frozen env and never
raised. The fault reads are counted at `ActionLoader.raise_fault`, the one place the env
reads its fault record.
"""

from __future__ import annotations

import contextlib
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import kernelgym.envs as kge
from kernelgym.collectors.device_collector import DeviceCollector
from kernelgym.collectors.rollout import Actor
from kernelgym.envs.runtime.actions import ActionLoader

N_ENVS = 5
CASES = {  # env id -> (a bad action value, the error it must raise at env index {env})
    "CartPole-v1": (7, r"actions: expected values in Discrete\(2\), got 7 at index \({env},\)"),
    "Pendulum-v1": (math.nan, r"actions: expected finite values, got nan at index \({env}, 0\)"),
}


class BadActionActor(Actor):
    """Acts with zeros, except once: env ``env`` gets ``value`` at acted step ``at`` (counted
    over all fragments; look-ahead calls are never acted upon and not counted)."""

    def __init__(self, env: int, value: float, at: int):
        super().__init__()
        self.env, self.value, self.at = env, value, at
        self.acted = 0

    def step(self, stepno, obs, act, rew, fin, *, hx=None, virtual=False):
        action = torch.zeros_like(act)
        if not virtual:
            if self.acted == self.at:
                action[0, self.env] = self.value
            self.acted += 1
        return action, (), {}


@contextlib.contextmanager
def counting_fault_reads():
    """The envs' reads of their action fault record (a host read on cuda), in a list."""
    reads = []
    read = ActionLoader.raise_fault

    def counted(self, actions=None):
        reads.append(self)
        return read(self, actions)

    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(ActionLoader, "raise_fault", counted)
        yield reads


def collect_until_the_bad_action(backend, env_id, n_steps, fragment, step, env_index, fault_reads):
    value, message = CASES[env_id]
    env = kge.make(env_id, N_ENVS, backend=backend, seed=4, autoreset_mode="same_step", check_action_values="deferred")
    actor = BadActionActor(env_index, value, fragment * n_steps + step)
    collector = DeviceCollector(env, actor, n_steps, seed=4)
    fault_reads.clear()  # the env's reset read its record once
    for done in range(fragment):
        collector.collect()
        assert len(fault_reads) == done + 1  # one read per fragment, none per step
    with pytest.raises(ValueError, match=message.format(env=env_index)) as raised:
        collector.collect()
    assert len(fault_reads) == fragment + 1
    return env, collector, actor, raised.value


@pytest.mark.sim
@settings(max_examples=6, deadline=None)
@given(st.sampled_from(sorted(CASES)), st.integers(1, 4), st.integers(0, 1), st.data())
def test_a_deferred_bad_action_raises_at_the_end_of_its_fragment_in_the_simulator(env_id, n_steps, fragment, data):
    step = data.draw(st.integers(0, n_steps - 1))
    env_index = data.draw(st.integers(0, N_ENVS - 1))
    with counting_fault_reads() as reads:
        env, collector, actor, error = collect_until_the_bad_action(
            "sim", env_id, n_steps, fragment, step, env_index, reads
        )
        # deferred: the whole fragment was collected (every step, and the look-ahead) before it raised
        assert actor.acted == (fragment + 1) * n_steps
        assert any("end" in note for note in error.__notes__)
        # the record is cleared: the next fragment (good actions) collects without raising
        collector.collect()
        assert len(reads) == fragment + 2
        env.close()


@pytest.mark.parametrize("env_id", sorted(CASES))
def test_a_bad_action_raises_in_its_fragment_on_the_cpu(env_id):
    # the cpu reads its record in the step (a read costs nothing there): it raises in that step
    n_steps, fragment, step, env_index = 4, 1, 2, 3
    value, message = CASES[env_id]
    env = kge.make(env_id, N_ENVS, backend="cpu", seed=4, autoreset_mode="same_step", check_action_values="deferred")
    actor = BadActionActor(env_index, value, fragment * n_steps + step)
    collector = DeviceCollector(env, actor, n_steps, seed=4)
    with counting_fault_reads() as reads:
        collector.collect()
        assert len(reads) == 1  # the fragment's end
        with pytest.raises(ValueError, match=message.format(env=env_index)):
            collector.collect()
    assert actor.acted == fragment * n_steps + step + 1  # raised in the bad step
    collector.collect()


def test_an_env_without_an_action_check_is_collected_as_before():
    # a duck-typed env without check_actions is not read
    from test_device_collector import TorchCounterVectorEnv
    from test_rollout_envs import ConstantActor

    env = TorchCounterVectorEnv(3, max_len=4, limit=5)
    fragment = DeviceCollector(env, ConstantActor(1), 3, seed=0).collect()
    assert torch.equal(fragment.state.rew[1:], torch.full((3, 3), 1.5))


@pytest.mark.gpu
@pytest.mark.parametrize("side_stream", [False, True])
def test_a_deferred_bad_action_raises_at_the_end_of_its_fragment_on_a_gpu(side_stream):
    # cuda's default check is "deferred"; on a side stream the fault read waits for its kernels
    n_steps, step, env_index = 6, 5, 4
    value, message = CASES["CartPole-v1"]
    env = kge.make("CartPole-v1", N_ENVS, backend="cuda", seed=4, autoreset_mode="same_step")
    actor = BadActionActor(env_index, value, step).to(env.device)
    collector = DeviceCollector(env, actor, n_steps, seed=4)
    stream = torch.cuda.Stream() if side_stream else torch.cuda.current_stream()
    stream.wait_stream(torch.cuda.current_stream())
    with counting_fault_reads() as reads, torch.cuda.stream(stream):
        with pytest.raises(ValueError, match=message.format(env=env_index)):
            collector.collect()
        assert len(reads) == 1 and actor.acted == n_steps
        collector.collect()
        assert len(reads) == 2
