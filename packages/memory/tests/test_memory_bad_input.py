"""Bad input: a clear error naming the argument, raised before anything is written."""

import numpy as np
import pytest
import torch

from kernelgym.memory import PrioritizedMemory, RandomMemory, SequenceMemory


def memory_with_data(cls=RandomMemory, **kwargs):
    memory = cls(4, 2, device="cpu", seed=0, **kwargs)
    memory.create_tensor("obs", 3)
    memory.create_tensor("actions", 1, torch.int64)
    for step in range(3):
        memory.add_samples(obs=torch.full((2, 3), float(step)), actions=torch.full((2, 1), step))
    return memory


def state(memory):
    return (
        len(memory),
        memory.memory_index,
        memory.env_index,
        memory.filled,
        [t.clone() for t in memory.tensors.values()],
    )


def assert_unchanged(memory, before):
    after = state(memory)
    assert after[:4] == before[:4]
    assert all(torch.equal(a.nan_to_num(), b.nan_to_num()) for a, b in zip(before[4], after[4]))


@pytest.mark.parametrize(
    "samples, error, match",
    [
        ({}, ValueError, "keyword"),
        ({"nothing": torch.zeros(2, 3)}, ValueError, "none of"),
        (
            {"obs": torch.zeros(2, 4), "actions": torch.zeros(2, 1, dtype=torch.int64)},
            ValueError,
            "'obs' must have shape",
        ),
        # a dtype whose cast is lossy (0.1 is no float32); exact casts are stored (test_memory_skrl_dropin.py)
        ({"obs": torch.full((2, 3), 0.1, dtype=torch.float64)}, TypeError, "'obs' holds torch.float32; 0.1 "),
        (
            {"obs": torch.zeros(2, 3), "actions": torch.zeros(3, 1, dtype=torch.int64)},
            ValueError,
            "'actions' has 3 samples",
        ),
        (
            {"actions": torch.zeros(2, 1, dtype=torch.int64), "obs": [[0.0] * 3] * 2},
            TypeError,
            "'obs' must be a torch.Tensor",
        ),
        ({"obs": torch.zeros(9, 3)}, ValueError, "1 to 8 samples"),
        ({"obs": torch.zeros(0, 3)}, ValueError, "1 to 8 samples"),
    ],
)
def test_bad_add_samples_raise_before_anything_is_written(samples, error, match):
    memory = memory_with_data()
    before = state(memory)
    with pytest.raises(error, match=match):
        memory.add_samples(**samples)
    assert_unchanged(memory, before)


def test_numpy_samples_are_accepted():
    memory = memory_with_data()
    memory.add_samples(obs=np.ones((2, 3), dtype=np.float32), actions=np.ones((2, 1), dtype=np.int64))
    assert len(memory) == 8


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda m: m.sample(["obs", "value"], 2), KeyError, "no tensor 'value'"),
        (lambda m: m.sample("obs", 2), TypeError, "names"),
        (lambda m: m.sample(["obs"], 0), ValueError, "batch_size"),
        (lambda m: m.sample(["obs"], 2.0), TypeError, "batch_size"),
        (lambda m: m.sample(["obs"], 2, mini_batches=3), ValueError, "mini_batches"),
        (lambda m: m.sample(["obs"], 2, sequence_length=0), ValueError, "sequence_length"),
        (lambda m: m.get_tensor_by_name("value"), KeyError, "value"),
        (lambda m: m.set_tensor_by_name("value", torch.zeros(1)), KeyError, "value"),
        (lambda m: m.set_tensor_by_name("obs", torch.zeros(4, 2, 2)), ValueError, "shape"),
        (lambda m: m.set_tensor_by_name("obs", torch.zeros(4, 2, 3, dtype=torch.float64)), TypeError, "dtype"),
        (lambda m: m.sample_by_index(["obs"], torch.tensor([0, 6])), ValueError, r"\[0, 6\)"),
        (lambda m: m.sample_by_index(["obs"], torch.tensor([-1])), ValueError, "indexes"),
        (lambda m: m.sample_by_index(["obs"], torch.tensor([0.5])), TypeError, "indexes"),
        (lambda m: m.sample_all(["obs"], mini_batches=7), ValueError, "mini_batches"),
        (lambda m: m.create_tensor("bad name", 1), ValueError, "name"),
        (lambda m: m.create_tensor("__priority", 1), ValueError, "name"),
        (lambda m: m.create_tensor("new", 0), ValueError, "size"),
        (lambda m: m.create_tensor("new", "3"), TypeError, "size"),
        (lambda m: m.create_tensor("new", 1, dtype="float32"), TypeError, "dtype"),
        (lambda m: m.advance(9), ValueError, "num_samples"),
        (lambda m: m.attach_tensor("other", torch.zeros(3, 2, 1)), ValueError, r"\(4, 2, \.\.\.\)"),
        (lambda m: m.attach_tensor("other", torch.zeros(2, 4, 1).transpose(0, 1)), ValueError, "contiguous"),
    ],
)
def test_bad_arguments_name_the_argument_and_change_nothing(call, error, match):
    memory = memory_with_data()
    before = state(memory)
    with pytest.raises(error, match=match):
        call(memory)
    assert_unchanged(memory, before)


def test_batch_larger_than_the_memory_without_replacement_is_refused():
    memory = memory_with_data(replacement=False)
    with pytest.raises(ValueError, match="batch_size: .* at most 6"):
        memory.sample(["obs"], 7)
    ((obs,),) = memory.sample(["obs"], 6)
    assert sorted(memory.get_sampling_indexes().tolist()) == list(range(6))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0])
def test_non_finite_or_negative_priorities_are_refused_and_the_tree_is_unchanged(bad):
    memory = memory_with_data(PrioritizedMemory)
    before = memory.get_priorities()
    with pytest.raises(ValueError, match="priorities"):
        memory.update_priorities(torch.tensor([0, 1]), torch.tensor([1.0, bad]))
    assert torch.equal(memory.get_priorities(), before)


@pytest.mark.parametrize(
    "indexes, priorities, error",
    [
        (torch.tensor([0, 6]), torch.tensor([1.0, 1.0]), ValueError),  # 6 is not written
        (torch.tensor([0, 1]), torch.tensor([1.0]), ValueError),
        (torch.tensor([0.0]), torch.tensor([1.0]), TypeError),
        (torch.tensor([0]), torch.tensor([True]), TypeError),
    ],
)
def test_bad_priority_updates_are_refused(indexes, priorities, error):
    memory = memory_with_data(PrioritizedMemory)
    before = memory.get_priorities()
    with pytest.raises(error):
        memory.update_priorities(indexes, priorities)
    assert torch.equal(memory.get_priorities(), before)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: RandomMemory(0), "memory_size"),
        (lambda: RandomMemory(4, num_envs=0), "num_envs"),
        (lambda: RandomMemory(True), "memory_size"),
        (lambda: RandomMemory(4, seed=-1), "seed"),
        (lambda: PrioritizedMemory(4, alpha=-1.0), "alpha"),
        (lambda: PrioritizedMemory(4, beta=float("nan")), "beta"),
        (lambda: SequenceMemory(4, sequence_length=0), "sequence_length"),
        (lambda: SequenceMemory(4, burn_in=-1), "burn_in"),
        (lambda: RandomMemory(4, episode_end_names="terminated"), "episode_end_names"),
    ],
)
def test_bad_constructor_arguments(make, match):
    with pytest.raises((TypeError, ValueError), match=match):
        make()


def test_sampling_an_empty_memory_is_refused():
    memory = RandomMemory(4, device="cpu")
    memory.create_tensor("obs", 1)
    for call in (lambda: memory.sample(["obs"], 1), lambda: memory.sample_all(["obs"])):
        with pytest.raises(ValueError, match="empty"):
            call()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised without a GPU")
def test_asking_for_cuda_without_a_gpu_is_an_error_not_a_cpu_fallback():
    with pytest.raises(ValueError, match="device: 'cuda'"):
        RandomMemory(4, device="cuda")
