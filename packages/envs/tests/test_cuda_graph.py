"""capture_step: env.step(policy(obs)) captured in a CUDA graph and replayed.

Without a GPU the recipe runs against `Recorder`, a stand-in for torch's streams and graphs
that logs what happens on which stream. On CPU a capture cannot record without running, so
the stand-in's capture runs the step once (a GPU's runs nothing) and a replay runs it again:
the tests count that step when they compare with direct ``env.step`` calls. On a GPU
(``gpu``-marked) the real capture is compared with direct calls.
"""

from __future__ import annotations

import contextlib

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import kernelgym.envs as kge
from kernelgym.core import streams
from kernelgym.envs.cuda_graph import capture_step

N_ENVS = 6


class Recorder:
    """Streams and graphs as `capture_step` uses them, logged; ``current`` names the stream."""

    def __init__(self):
        self.current = "default"
        self.events = []

    def side_stream(self):
        self.events.append(("side_stream", self.current))
        return "side"

    @contextlib.contextmanager
    def on_stream(self, stream):
        before, self.current = self.current, stream
        self.events.append(("enter", stream))
        try:
            yield
        finally:
            self.current = before
            self.events.append(("exit", stream))

    def join(self, stream):
        self.events.append(("join", self.current, stream))

    def capture(self, body):
        before, self.current = self.current, "capture"
        self.events.append(("capture",))
        try:
            outputs = body()  # the stand-in must run it to have its outputs (a GPU records only)
        finally:
            self.current = before
        return [body], outputs

    def replay(self, graph):
        self.events.append(("replay",))
        graph[0]()


class Balance:
    """Push the cart towards where the pole falls; logs the stream it ran on."""

    def __init__(self, recorder=None):
        self.recorder, self.streams = recorder, []

    def __call__(self, obs):
        self.streams.append(self.recorder.current if self.recorder else None)
        return (obs[:, 2] + obs[:, 3] > 0).long()


def direct_steps(backend, seed, count):
    """The outputs of ``count`` direct steps with the same policy, copied after each."""
    env = kge.make("CartPole-v1", N_ENVS, backend=backend, seed=seed, check_action_values="deferred")
    obs, _ = env.reset()
    policy, outputs = Balance(), []
    for _ in range(count):
        got = env.step(policy(obs))
        outputs.append(tuple(t.clone() for t in got[:4]))
    return outputs


def check_capture_and_replays(backend, seed, warmup, replays):
    recorder = Recorder()
    env = kge.make("CartPole-v1", N_ENVS, backend=backend, seed=seed, check_action_values="deferred")
    obs, _ = env.reset()
    policy = Balance(recorder)
    step = capture_step(env, policy, obs, warmup=warmup, api=recorder)
    # torch's recipe: a side stream that waits for the current one, warm-up there, the
    # current stream waits for it, then the capture
    assert recorder.events == [
        ("side_stream", "default"),
        ("enter", "side"),
        ("exit", "side"),
        ("join", "default", "side"),
        ("capture",),
    ]
    assert policy.streams == ["side"] * warmup + ["capture"]
    assert step.obs is obs
    want = direct_steps(backend, seed, warmup + 1 + replays)  # + 1: the stand-in's capture ran
    for k in range(replays):
        step.replay()
        got = (step.obs, step.rewards, step.terminated, step.truncated)
        for g, w in zip(got, want[warmup + 1 + k]):
            assert torch.equal(g.cpu(), w.cpu())
    assert recorder.events[5:] == [("replay",)] * replays
    return env, recorder


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 4), st.integers(0, 12))
def test_replays_step_the_env_as_direct_calls_do(seed, warmup, replays):
    check_capture_and_replays("cpu", seed, warmup, replays)


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 3), st.integers(1, 6), st.integers(0, 4))
def test_a_replay_of_a_multi_step_capture_steps_the_env_as_many_direct_calls(seed, warmup, steps, replays):
    recorder = Recorder()
    env = kge.make("CartPole-v1", N_ENVS, backend="cpu", seed=seed, check_action_values="deferred")
    obs, _ = env.reset()
    policy = Balance(recorder)
    captured = capture_step(env, policy, obs, steps=steps, warmup=warmup, api=recorder)
    assert captured.steps == steps
    # the warm-up steps one at a time, the capture records all ``steps`` on the capture stream
    assert policy.streams == ["side"] * warmup + ["capture"] * steps
    # the stand-in's capture ran its steps once (a GPU's records them only)
    want = direct_steps("cpu", seed, warmup + steps * (1 + replays))
    for k in range(replays):
        captured.replay()
        got = (captured.obs, captured.rewards, captured.terminated, captured.truncated)
        for g, w in zip(got, want[warmup + steps * (2 + k) - 1]):
            assert torch.equal(g, w)
    assert recorder.events[5:] == [("replay",)] * replays
    # each replay runs every captured step again, on the stream current at the replay
    assert policy.streams[warmup + steps :] == ["default"] * steps * replays


@pytest.mark.parametrize("steps", [0, -2, 2.0, True, None])
def test_a_bad_step_count_is_refused_naming_the_argument(steps):
    env = kge.make("CartPole-v1", N_ENVS, backend="cpu", seed=0)
    obs, _ = env.reset()
    recorder = Recorder()
    with pytest.raises(ValueError, match=rf"steps: expected an int >= 1 \(env steps per replay\), got {steps!r}"):
        capture_step(env, Balance(recorder), obs, steps=steps, api=recorder)
    assert recorder.events == []


@pytest.mark.sim
def test_the_env_kernels_run_on_the_side_stream_then_on_the_capture_stream(monkeypatch):
    # the env's launches ask for torch's current stream at each call: the warm-up's on the
    # side stream, the captured one on the capture stream
    recorder = None
    reads = []
    monkeypatch.setattr(streams, "current_stream", lambda: reads.append(recorder.current if recorder else None) or 0)
    env = kge.make("CartPole-v1", N_ENVS, backend="sim", seed=5, check_action_values="deferred")
    obs, _ = env.reset()
    reads.clear()
    recorder = Recorder()
    capture_step(env, Balance(recorder), obs, warmup=2, api=recorder)
    assert reads == ["side", "side", "capture"]  # one composed launch per step
    check_capture_and_replays("sim", 5, 2, 6)


def test_what_cannot_be_captured_is_refused_before_anything_runs():
    env = kge.make("CartPole-v1", N_ENVS, backend="cpu", seed=0)
    obs, _ = env.reset()
    with pytest.raises(
        ValueError, match="env: CUDA graphs capture cuda work, expected an env on backend 'cuda', got 'cpu'"
    ):
        capture_step(env, Balance(), obs)
    recorder = Recorder()
    for warmup in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match=r"warmup: expected an int >= 1"):
            capture_step(env, Balance(), obs, warmup=warmup, api=recorder)
    with pytest.raises(ValueError, match="obs: expected the env's observation buffer"):
        capture_step(env, Balance(recorder), obs.clone(), api=recorder)
    assert recorder.events == []  # nothing ran


@pytest.mark.sim
def test_a_sync_action_check_is_refused():
    env = kge.make("CartPole-v1", N_ENVS, backend="sim", seed=0, check_action_values="sync")
    obs, _ = env.reset()
    with pytest.raises(ValueError, match="check_action_values 'sync' reads the host at every step"):
        capture_step(env, Balance(), obs, api=Recorder())


@pytest.mark.gpu
@pytest.mark.parametrize("replays", [1, 20])
def test_a_captured_step_replays_as_direct_calls_on_a_gpu(replays):
    seed, warmup = 11, 3
    env = kge.make("CartPole-v1", N_ENVS, backend="cuda", seed=seed)
    obs, _ = env.reset()
    step = capture_step(env, Balance(), obs, warmup=warmup)
    want = direct_steps("cuda", seed, warmup + replays)  # the capture itself runs nothing
    for k in range(replays):
        step.replay()
        torch.cuda.current_stream().synchronize()
        for got, expected in zip((step.obs, step.rewards, step.terminated, step.truncated), want[warmup + k]):
            assert torch.equal(got, expected)
    env.check_actions()


@pytest.mark.gpu
def test_an_env_on_a_side_stream_steps_and_reads_as_on_the_default_stream():
    # writes (reset), kernels and host reads (numpy(), get_state()) all go through torch's
    # current stream: busy-waiting on it before each step must not change what the host reads
    def run(on_side):
        env = kge.make("CartPole-v1", 1024, backend="cuda", seed=3)
        stream = torch.cuda.Stream() if on_side else torch.cuda.current_stream()
        stream.wait_stream(torch.cuda.current_stream())
        policy, reads = Balance(), []
        with torch.cuda.stream(stream):
            obs, _ = env.reset()
            for _ in range(5):
                torch.cuda._sleep(5_000_000)
                env.step(policy(obs))
                reads.append(env.numpy().obs.copy())
            state = env.get_state()
        return reads, state

    (side_reads, side_state), (reads, state) = run(True), run(False)
    for got, want in zip(side_reads, reads):
        assert (got == want).all()
    assert all((side_state[name] == state[name]).all() for name in state)


@pytest.mark.gpu
def test_a_captured_fragment_of_16_steps_replays_as_direct_calls_on_a_gpu():
    seed, warmup, steps = 12, 2, 16
    env = kge.make("CartPole-v1", N_ENVS, backend="cuda", seed=seed)
    obs, _ = env.reset()
    captured = capture_step(env, Balance(), obs, steps=steps, warmup=warmup)
    want = direct_steps("cuda", seed, warmup + 3 * steps)
    for k in range(3):
        captured.replay()
        torch.cuda.current_stream().synchronize()
        got = (captured.obs, captured.rewards, captured.terminated, captured.truncated)
        for g, w in zip(got, want[warmup + steps * (k + 1) - 1]):
            assert torch.equal(g, w)
    env.check_actions()
