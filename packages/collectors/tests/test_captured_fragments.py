"""DeviceCollector(capture=True): the fragment captured once and replayed, or eager with a warning.

Without a GPU the capture path runs against `Recorder`, a stand-in for torch's streams and
graphs that logs each call. Its capture records the fragment's body and runs nothing (as a
GPU's capture runs nothing); each replay runs the body again, so the fragments a captured
collector returns can be compared bit for bit with an eager collector's, on the CPU. The
host reads of the warm-up fragment are counted by the real `HostReads`.
"""

from __future__ import annotations

import contextlib
import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_collector_faults_deferred import counting_fault_reads
from test_device_collector import TorchCounterVectorEnv
from test_rollout_envs import CountingActor

import kernelgym.envs as kge
from kernelgym.collectors.device_collector import CaptureFallbackWarning, DeviceCollector
from kernelgym.collectors.host_reads import HostReads
from kernelgym.collectors.rollout import Actor

WARM_UP_AND_CAPTURE = [
    ("side_stream",),
    ("enter", "side"),
    ("host_reads",),
    ("exit", "side"),
    ("join", "side"),
    ("capture",),
]


class Recorder:
    """Streams, host-read watch and graphs as `DeviceCollector` uses them, logged."""

    def __init__(self, refuse_capture: bool = False):
        self.events: list[tuple] = []
        self.refuse_capture = refuse_capture

    def side_stream(self):
        self.events.append(("side_stream",))
        return "side"

    @contextlib.contextmanager
    def on_stream(self, stream):
        self.events.append(("enter", stream))
        try:
            yield
        finally:
            self.events.append(("exit", stream))

    def join(self, stream):
        self.events.append(("join", stream))

    @contextlib.contextmanager
    def host_reads(self):
        self.events.append(("host_reads",))
        with HostReads() as reads:
            yield reads

    def capture(self, body):
        self.events.append(("capture",))
        if self.refuse_capture:
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing")
        return [body], None  # a GPU's capture runs nothing: the body runs at each replay

    def replay(self, graph):
        self.events.append(("replay",))
        graph[0]()


class SamplingActor(Actor):
    """A small MLP sampling from a Categorical (torch's RNG), with a value and log-prob."""

    def __init__(self, obs_size: int = 2, actions: int = 3):
        super().__init__()
        self.net = torch.nn.Linear(obs_size, actions)

    def step(self, stepno, obs, act, rew, fin, *, hx=None, virtual=False):
        policy = torch.distributions.Categorical(logits=self.net(obs.float()), validate_args=False)
        action = policy.sample()
        return action, (), {"log_prob": policy.log_prob(action), "value": obs[..., 0] * 0.5}


class ReadingActor(SamplingActor):
    """Reads the host within each step (a ``.item()``): a graph cannot hold that."""

    def step(self, stepno, obs, act, rew, fin, *, hx=None, virtual=False):
        if obs.sum().item() < 0:  # never true: the read is the point
            raise AssertionError
        return super().step(stepno, obs, act, rew, fin, hx=hx, virtual=virtual)


def snapshot(fragment) -> list[torch.Tensor]:
    """Copies of every tensor of a fragment (the collector refills it in place)."""
    tensors = list(fragment.state) + list(fragment.actor.values()) + [fragment.env["final_obs"]]
    if isinstance(fragment.hx, torch.Tensor):
        tensors.append(fragment.hx)
    return [tensor.clone() for tensor in tensors]


def fragments(make_env, make_actor, n_steps, count, seed, **options) -> tuple[list, DeviceCollector]:
    torch.manual_seed(seed)
    collector = DeviceCollector(make_env(), make_actor(), n_steps, **options)
    return [snapshot(collector.collect()) for _ in range(count)], collector


def assert_equal_fragments(got, want):
    assert len(got) == len(want)
    for k, (fragment, expected) in enumerate(zip(got, want)):
        for index, (g, w) in enumerate(zip(fragment, expected)):
            assert g.dtype == w.dtype and torch.equal(g, w), (k, index)


@settings(max_examples=15, deadline=None)
@given(
    n_envs=st.integers(1, 5),
    n_steps=st.integers(1, 6),
    count=st.integers(1, 4),
    max_len=st.integers(1, 5),
    limit=st.integers(1, 5),
    seed=st.integers(0, 2**31),
    recurrent=st.booleans(),
)
def test_captured_fragments_equal_the_eager_ones_bit_for_bit(n_envs, n_steps, count, max_len, limit, seed, recurrent):
    def make_env():
        return TorchCounterVectorEnv(n_envs, max_len, limit)

    make_actor = CountingActor if recurrent else SamplingActor
    want, _ = fragments(make_env, make_actor, n_steps, count, seed)
    recorder = Recorder()
    with warnings.catch_warnings():
        warnings.simplefilter("error", CaptureFallbackWarning)  # nothing here may fall back
        got, collector = fragments(make_env, make_actor, n_steps, count, seed, capture=True, graphs=recorder)
    assert_equal_fragments(got, want)
    # torch's recipe: the first fragment eager on a side stream (its host reads counted),
    # the current stream waits for it, the capture; then one replay per fragment
    assert recorder.events == WARM_UP_AND_CAPTURE + [("replay",)] * (count - 1)
    assert collector.captured and collector.eager_reason is None


def test_cartpole_fragments_replay_as_eager_ones_and_read_the_action_check_once_each():
    def make_env():
        return kge.make(
            "CartPole-v1", 6, backend="cpu", seed=3, autoreset_mode="same_step", check_action_values="deferred"
        )

    with counting_fault_reads() as reads:
        want, _ = fragments(make_env, lambda: SamplingActor(4, 2), 5, 4, seed=9)
        assert len(reads) == 4  # one per fragment
        reads.clear()
        recorder = Recorder()
        got, collector = fragments(make_env, lambda: SamplingActor(4, 2), 5, 4, seed=9, capture=True, graphs=recorder)
        assert len(reads) == 4  # one per fragment, the replayed ones too, none per step
    assert_equal_fragments(got, want)
    assert collector.captured
    assert recorder.events == WARM_UP_AND_CAPTURE + [("replay",)] * 3


def test_the_cpu_backend_falls_back_to_eager_with_one_warning():
    def make_env():
        return kge.make("CartPole-v1", 4, backend="cpu", seed=1, autoreset_mode="same_step", check_action_values=False)

    want, _ = fragments(make_env, lambda: SamplingActor(4, 2), 3, 3, seed=2)
    with pytest.warns(CaptureFallbackWarning, match="backend is 'cpu': CUDA graphs capture cuda work only") as caught:
        got, collector = fragments(make_env, lambda: SamplingActor(4, 2), 3, 3, seed=2, capture=True)
    assert len(caught) == 1  # once, at construction: not at every fragment
    assert caught[0].filename == __file__  # it points at the caller's line
    assert_equal_fragments(got, want)
    assert not collector.captured and "cpu" in collector.eager_reason


@pytest.mark.parametrize("check", ["sync", True])
def test_a_sync_action_check_falls_back_before_any_stream_call(check):
    recorder = Recorder()
    env = kge.make("CartPole-v1", 4, backend="cpu", seed=1, autoreset_mode="same_step", check_action_values=check)
    with pytest.warns(CaptureFallbackWarning, match="check_action_values is 'sync', a host read at every step"):
        collector = DeviceCollector(env, SamplingActor(4, 2), 3, capture=True, graphs=recorder)
    collector.collect()
    collector.collect()
    assert recorder.events == [] and not collector.captured


def test_an_actor_that_reads_the_host_falls_back_naming_the_read_and_where():
    def make_env():
        return TorchCounterVectorEnv(3, 4, 3)

    want, _ = fragments(make_env, ReadingActor, 4, 3, seed=5)
    recorder = Recorder()
    with pytest.warns(CaptureFallbackWarning) as caught:
        got, collector = fragments(make_env, ReadingActor, 4, 3, seed=5, capture=True, graphs=recorder)
    assert len(caught) == 1 and caught[0].filename == __file__
    message = str(caught[0].message)
    assert "the actor or the env reads the host within a fragment" in message
    assert "aten._local_scalar_dense at" in message and "test_captured_fragments.py" in message
    assert_equal_fragments(got, want)  # the warm-up fragment, then eager ones
    assert recorder.events == WARM_UP_AND_CAPTURE[:-1]  # no capture was attempted
    assert not collector.captured and "_local_scalar_dense" in collector.eager_reason


def test_a_refused_capture_falls_back_to_eager_fragments():
    def make_env():
        return TorchCounterVectorEnv(3, 4, 3)

    want, _ = fragments(make_env, SamplingActor, 2, 3, seed=6)
    recorder = Recorder(refuse_capture=True)
    with pytest.warns(CaptureFallbackWarning, match="torch refused the capture .CUDA error: operation not permitted"):
        got, collector = fragments(make_env, SamplingActor, 2, 3, seed=6, capture=True, graphs=recorder)
    assert_equal_fragments(got, want)
    assert recorder.events == WARM_UP_AND_CAPTURE  # tried once, never replayed
    assert not collector.captured


@pytest.mark.parametrize("capture", ["yes", 1, None])
def test_capture_must_be_a_bool(capture):
    with pytest.raises(TypeError, match=rf"capture: expected True or False, got {capture!r}"):
        DeviceCollector(TorchCounterVectorEnv(2, 3, 3), SamplingActor(), 2, capture=capture)


@pytest.mark.gpu
def test_captured_cartpole_fragments_equal_eager_ones_on_a_gpu():
    def make_env():
        return kge.make("CartPole-v1", 256, backend="cuda", seed=3, autoreset_mode="same_step")

    want, _ = fragments(make_env, lambda: SamplingActor(4, 2).cuda(), 16, 4, seed=9)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CaptureFallbackWarning)
        got, collector = fragments(make_env, lambda: SamplingActor(4, 2).cuda(), 16, 4, seed=9, capture=True)
    assert collector.captured
    assert_equal_fragments(got, want)


def test_graphs_without_capture_are_refused():
    with pytest.raises(ValueError, match="graphs: streams and graphs for a capture, expected with capture=True"):
        DeviceCollector(TorchCounterVectorEnv(2, 3, 3), SamplingActor(), 2, graphs=Recorder())
