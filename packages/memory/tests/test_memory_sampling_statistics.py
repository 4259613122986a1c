"""Statistical checks of sampling (chi-square with fixed seeds and loose bounds) and the sum tree."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgym.memory import PrioritizedMemory, RandomMemory, SumTree


def memory_of(cls, memory_size=8, num_envs=4, steps=8, **kwargs):
    memory = cls(memory_size, num_envs, device="cpu", seed=123, **kwargs)
    memory.create_tensor("x", 1, torch.int64)
    for step in range(steps):
        memory.add_samples(x=torch.arange(num_envs) + step * num_envs)
    return memory


@pytest.mark.parametrize("steps", [3, 8, 11])
def test_uniform_sampling_with_replacement_is_uniform_over_written_cells(chi_square, steps):
    memory = memory_of(RandomMemory, steps=steps)
    count = len(memory)
    counts = torch.zeros(count)
    for _ in range(40):
        ((x,),) = memory.sample(["x"], 1000)
        cells = memory.get_sampling_indexes()
        assert cells.max() < count and torch.equal(x.view(-1), memory.tensors_view["x"].view(-1)[cells])
        counts += torch.bincount(cells, minlength=count)
    statistic, bound = chi_square(counts, torch.full((count,), counts.sum() / count))
    assert statistic < bound


def test_sampling_without_replacement_never_repeats_and_covers_uniformly(chi_square):
    memory = memory_of(RandomMemory, replacement=False)
    counts = torch.zeros(len(memory))
    for _ in range(400):
        memory.sample(["x"], 10)
        indexes = memory.get_sampling_indexes()
        assert indexes.unique().numel() == 10
        counts += torch.bincount(indexes, minlength=len(memory))
    statistic, bound = chi_square(counts, torch.full_like(counts, counts.sum() / len(counts)))
    assert statistic < bound


def test_prioritized_sampling_follows_the_priorities(chi_square):
    memory = memory_of(PrioritizedMemory, memory_size=4, num_envs=4, steps=4, alpha=1.0, epsilon=0.0)
    priorities = torch.arange(1, 17, dtype=torch.float64)
    memory.update_priorities(torch.arange(16), priorities)
    counts = torch.zeros(16, dtype=torch.float64)
    for _ in range(50):
        memory.sample(["x"], 1000)
        counts += torch.bincount(memory.get_sampling_indexes(), minlength=16)
    statistic, bound = chi_square(counts, priorities / priorities.sum() * counts.sum())
    assert statistic < bound


def test_alpha_flattens_priorities_and_zero_alpha_is_uniform(chi_square):
    memory = memory_of(PrioritizedMemory, memory_size=2, num_envs=4, steps=2, alpha=0.0)
    memory.update_priorities(torch.arange(8), torch.tensor([100.0, 0, 0, 0, 0, 0, 0, 1]))
    counts = torch.zeros(8)
    for _ in range(20):
        memory.sample(["x"], 1000)
        counts += torch.bincount(memory.get_sampling_indexes(), minlength=8)
    statistic, bound = chi_square(counts, torch.full((8,), counts.sum() / 8))
    assert statistic < bound


def test_new_cells_get_the_largest_priority_and_unwritten_cells_none():
    memory = memory_of(PrioritizedMemory, memory_size=4, num_envs=2, steps=2, alpha=1.0, epsilon=0.0)
    memory.update_priorities(torch.tensor([0, 1]), torch.tensor([5.0, 0.25]))
    memory.add_samples(x=torch.tensor([9, 9]))
    assert memory.get_priorities().tolist() == [5.0, 0.25, 1.0, 1.0, 5.0, 5.0, 0.0, 0.0]
    for _ in range(20):
        memory.sample(["x"], 64)
        assert memory.get_sampling_indexes().max() < 6


def test_importance_weights_match_their_definition():
    memory = memory_of(PrioritizedMemory, memory_size=2, num_envs=2, steps=2, alpha=1.0, beta=0.5, epsilon=0.0)
    memory.update_priorities(torch.arange(4), torch.tensor([1.0, 2.0, 3.0, 4.0]))
    ((x, mask, weights),) = memory.sample(["x"], 64, return_mask=True, return_weights=True)
    cells = memory.get_sampling_indexes()
    probabilities = (cells + 1).double() / 10
    expected = (4 * probabilities) ** -0.5
    assert torch.allclose(weights.double(), expected / expected.max())
    assert mask.all() and torch.equal(x.view(-1), cells)


def test_priorities_reset_with_the_memory():
    memory = memory_of(PrioritizedMemory, steps=3)
    memory.update_priorities(torch.tensor([0]), torch.tensor([50.0]))
    memory.reset()
    assert memory.get_priorities().eq(0).all()
    memory.add_samples(x=torch.arange(4))
    assert memory.get_priorities()[:4].eq(1).all()


@settings(max_examples=50)
@given(
    capacity=st.integers(1, 40),
    updates=st.lists(st.tuples(st.integers(0, 39), st.floats(0, 100)), max_size=30),
    ranges=st.lists(st.tuples(st.integers(0, 39), st.integers(1, 10), st.floats(0, 10)), max_size=4),
)
def test_sum_tree_sums_match_a_plain_sum(capacity, updates, ranges):
    tree = SumTree(capacity, torch.device("cpu"))
    reference = torch.zeros(capacity, dtype=torch.float64)
    for start, count, value in ranges:
        start, count = start % capacity, min(count, capacity - start % capacity)
        tree.fill_range(start, count, value)
        reference[start : start + count] = value
    for leaf, value in updates:
        tree.update(torch.tensor([leaf % capacity]), torch.tensor([value], dtype=torch.float64))
        reference[leaf % capacity] = value
    assert torch.allclose(tree.total(), reference.sum())
    assert torch.equal(tree.leaves, reference)
    # every internal node is the sum of its two children
    inner = tree.tree[1 : tree.leaf_offset]
    children = tree.tree.view(-1, 2)[1 : tree.leaf_offset].sum(1)
    assert torch.allclose(inner, children)
    if reference.sum() > 0:
        drawn = tree.sample(200, torch.Generator().manual_seed(0))
        assert (reference[drawn] > 0).all()


@pytest.mark.gpu
def test_prioritized_memory_samples_and_updates_on_cuda(chi_square):
    memory = PrioritizedMemory(64, 4, device="cuda", seed=0, alpha=1.0, epsilon=0.0)
    memory.create_tensor("x", 1, torch.int64)
    for step in range(64):
        memory.add_samples(x=torch.arange(4, device="cuda") + 4 * step)
    priorities = torch.arange(1, 257, dtype=torch.float64, device="cuda")
    memory.update_priorities(torch.arange(256, device="cuda"), priorities)
    counts = torch.zeros(256, dtype=torch.float64, device="cuda")
    for _ in range(100):
        ((x,),) = memory.sample(["x"], 4096)
        assert x.device.type == "cuda"
        counts += torch.bincount(memory.get_sampling_indexes(), minlength=256)
    statistic, bound = chi_square(counts.cpu(), (priorities / priorities.sum() * counts.sum()).cpu())
    assert statistic < bound
