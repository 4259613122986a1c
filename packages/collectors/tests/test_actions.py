"""The actor's actions reach the envs as they are, or are refused (never cast or spread).

``Tensor.copy_`` casts a float action to int (a discrete space then sees zeros) and
broadcasts a ``(1, 1)`` action to every env; every engine must refuse both, naming the
actor's output, before any env steps. ``DeviceCollector.add_to`` refuses a memory with
another number of envs.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_device_collector import TorchCounterVectorEnv
from test_rollout_envs import CounterEnv, counter_factory, policy

from kernelgym.collectors import WorkerError
from kernelgym.collectors.device_collector import DeviceCollector
from kernelgym.collectors.rollout import Actor, episode, evaluate, inprocess, pool


class ShapedActor(Actor):
    """Returns the policy's actions reshaped to ``shape`` (``"B"`` is the env count) and
    cast to ``dtype``."""

    def __init__(self, shape, dtype):
        super().__init__()
        self.shape, self.dtype = shape, dtype

    def step(self, stepno, obs, act, rew, fin, *, hx=None, virtual=False):
        actions = policy(obs, 0.0)
        shape = tuple(obs.shape[1] if size == "B" else size for size in self.shape)
        return actions.flatten()[: max(1, torch.Size(shape).numel())].reshape(shape).to(self.dtype), (), {}


def silent_step(*args, **kwargs):
    raise LookupError("no action")


FLOATS = st.sampled_from([torch.float16, torch.float32, torch.float64])
# (shape, dtype) pairs copy_ would silently accept: a float cast, or a broadcast
BAD_ACTIONS = st.one_of(
    st.tuples(st.just((1, "B")), FLOATS),
    st.tuples(st.sampled_from([(1, 1), (1,), (1, 1, 1)]), st.sampled_from([torch.int64, torch.int32])),
)


def expected_message(dtype):
    return r"the output 'action' of ShapedActor\.step: expected " + (
        r"dtype torch\.int64 .*got torch\.float" if dtype.is_floating_point else r"shape \(1, \d\) .*got \("
    )


@settings(max_examples=20, deadline=None)
@given(bad=BAD_ACTIONS, n_envs=st.integers(2, 4))
def test_every_in_process_engine_refuses_a_cast_or_spread_action_before_any_step(bad, n_envs):
    shape, dtype = bad
    actor = ShapedActor(shape, dtype)
    engines = {
        "inprocess": lambda envs: next(inprocess.rollout(envs, actor, n_steps=2)),
        "evaluate": lambda envs: evaluate(envs, actor, n_steps=2),
        "episode": lambda envs: next(episode(envs, actor)),
    }
    for name, run in engines.items():
        envs = [CounterEnv() for _ in range(n_envs)]
        with pytest.raises((TypeError, ValueError), match=expected_message(dtype)):
            run(envs)
        # an actor that never answers shows the steps taken without any action of its
        # (prepare steps one env once for the shapes): the refused action added none
        silent = [CounterEnv() for _ in range(n_envs)]
        actor.step = silent_step
        with pytest.raises(LookupError, match="no action"):
            run(silent)
        del actor.step
        assert [env.n_calls for env in envs] == [env.n_calls for env in silent], name


@settings(max_examples=20, deadline=None)
@given(bad=BAD_ACTIONS, n_envs=st.integers(2, 4))
def test_device_collector_refuses_a_cast_or_spread_action_before_any_step(bad, n_envs):
    shape, dtype = bad
    env = TorchCounterVectorEnv(n_envs, 3, 3)
    collector = DeviceCollector(env, ShapedActor(shape, dtype), 2)
    with pytest.raises((TypeError, ValueError), match=expected_message(dtype)):
        collector.collect()
    assert int(env.t.sum()) == 0  # never stepped


@pytest.mark.parametrize("shape", [(1, "B"), ("B",)])
def test_actions_that_fit_without_loss_are_taken_as_the_exact_ones(shape):
    # int32 casts to the int64 buffer without loss, (B,) fills (1, B) without spreading
    def seeded_envs():
        envs = [CounterEnv() for _ in range(3)]
        for seed, env in enumerate(envs):
            env.reset(seed=seed)
        return envs

    exact = next(inprocess.rollout(seeded_envs(), ShapedActor((1, "B"), torch.int64), n_steps=6))
    exact = [x.clone() for x in exact.state]  # the next rollout reuses no buffer, but be safe
    fitting = next(inprocess.rollout(seeded_envs(), ShapedActor(shape, torch.int32), n_steps=6))
    assert all(torch.equal(a, b) for a, b in zip(fitting.state, exact))


def test_a_worker_refusing_an_action_names_the_actors_output():
    batches = pool.rollout(
        counter_factory(),
        ShapedActor((1, "B"), torch.float32),
        n_steps=2,
        n_actors=1,
        n_per_actor=2,
        n_buffers=1,
        n_per_batch=1,
        start_method="fork",
        timeout=30,
    )
    with pytest.raises(WorkerError) as caught:
        next(batches)
    assert "the output 'action' of ShapedActor.step: expected dtype torch.int64" in caught.value.remote_traceback


@settings(max_examples=10, deadline=None)
@given(n_envs=st.integers(1, 4), memory_envs=st.integers(1, 6))
def test_add_to_refuses_a_memory_with_another_number_of_envs(n_envs, memory_envs):
    memory_module = pytest.importorskip("kernelgym.memory")  # the `memory` extra
    memory = memory_module.Memory(memory_size=8, num_envs=memory_envs, device="cpu")
    memory.create_tensor("rewards", 1, torch.float32)
    collector = DeviceCollector(TorchCounterVectorEnv(n_envs, 3, 2), ShapedActor((1, "B"), torch.int64), 2)
    collector.collect()
    if memory_envs == n_envs:
        collector.add_to(memory, {"rewards": "rew"})
        assert len(memory) == 2 * n_envs
    else:
        with pytest.raises(
            ValueError, match=rf"memory: expected num_envs={n_envs} \(the env's\), got num_envs={memory_envs}"
        ):
            collector.add_to(memory, {"rewards": "rew"})
        assert len(memory) == 0  # nothing written
