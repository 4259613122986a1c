"""Prioritized replay at extreme priorities: refused with a clear error, or sampled correctly."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgym.memory import PrioritizedMemory

extreme = st.one_of(
    st.floats(0.0, 1e308),
    st.sampled_from([0.0, 5e-324, 1e-300, 1e-10, 1.0, 1e10, 1e150, 1e300, 1.7e308]),
)


def filled(alpha, epsilon, memory_size=4, num_envs=2):
    memory = PrioritizedMemory(memory_size, num_envs, device="cpu", seed=0, alpha=alpha, epsilon=epsilon)
    memory.create_tensor("x", 1)
    memory.add_samples(x=torch.arange(memory_size * num_envs - 2, dtype=torch.float32))  # 2 cells unwritten
    return memory


@settings(max_examples=150, deadline=None)
@given(
    alpha=st.one_of(st.floats(0.0, 64.0), st.sampled_from([0.0, 0.6, 1.0, 2.0, 8.0])),
    epsilon=st.one_of(st.sampled_from([0.0, 1e-6, 1.0]), st.floats(0.0, 1e300)),
    beta=st.floats(0.0, 4.0),
    priorities=st.lists(extreme, min_size=6, max_size=6),
)
def test_extreme_priorities_are_refused_or_give_finite_correct_samples(alpha, epsilon, beta, priorities):
    memory = filled(alpha, epsilon)
    memory.beta = beta
    before = memory.get_priorities()
    try:
        memory.update_priorities(torch.arange(6), torch.tensor(priorities, dtype=torch.float64))
    except ValueError as error:
        message = str(error)
        assert message.startswith("priorities:") and "alpha" in message and "got" in message
        assert torch.equal(memory.get_priorities(), before)  # refused: nothing changed
        return
    weights = memory.get_priorities()
    assert math.isfinite(float(weights.sum()))
    ((x, mask, importance),) = memory.sample(["x"], 64, return_mask=True, return_weights=True)
    cells = memory.get_sampling_indexes()
    assert bool(((cells >= 0) & (cells < 6)).all())  # written cells only
    assert bool(torch.isfinite(importance).all()) and bool(((importance > 0) & (importance <= 1)).all())
    if float(weights.sum()) > 0:
        assert bool((weights[cells] > 0).all())  # a cell of weight 0 is never drawn
        expected = (weights[cells].min() / weights[cells]) ** beta  # (count * P(i)) ** -beta over its maximum
        assert torch.allclose(importance.double(), expected, rtol=1e-5, atol=0)
    else:  # every written cell at weight 0: equal weights, so uniform and weight 1
        assert bool((importance == 1).all())


def test_a_priority_whose_power_overflows_names_priority_alpha_and_limit():
    memory = filled(alpha=2.0, epsilon=0.0)
    with pytest.raises(
        ValueError, match=r"priorities: .*alpha=2.0.*at most .*got a weight of inf from a priority of 1e\+200"
    ):
        memory.update_priorities(torch.tensor([0]), torch.tensor([1e200], dtype=torch.float64))


def test_all_zero_priorities_without_epsilon_sample_uniformly_with_unit_weights():
    memory = filled(alpha=0.6, epsilon=0.0)
    memory.update_priorities(torch.arange(6), torch.zeros(6))
    counts = torch.zeros(8)
    for _ in range(50):
        ((_, importance),) = memory.sample(["x"], 60, return_weights=True)
        assert bool((importance == 1).all())
        counts += torch.bincount(memory.get_sampling_indexes(), minlength=8)
    assert counts[6:].sum() == 0 and bool((counts[:6] > 400).all())  # 500 expected per cell


@pytest.mark.parametrize("argument", ["alpha", "beta", "epsilon"])
@pytest.mark.parametrize("value", [math.inf, math.nan, -1.0])
def test_non_finite_or_negative_exponents_are_refused(argument, value):
    with pytest.raises(ValueError, match=f"{argument}: expected a finite number >= 0"):
        PrioritizedMemory(4, device="cpu", **{argument: value})


@settings(max_examples=40, deadline=None)
@given(priority=st.one_of(st.floats(3.5e38, 1e300), st.integers(2**64, 2**1000)))
def test_finite_list_priorities_beyond_float32_are_read_as_float64(priority):
    memory = filled(alpha=1.0, epsilon=0.0)
    memory.update_priorities([0], [priority])  # a list was read as float32: inf, "non-finite"
    assert memory.get_priorities()[0].item() == float(priority)


@pytest.mark.parametrize(
    ("indexes", "priorities", "error", "match"),
    [
        ([0], [10**400], ValueError, "priorities: 1000.* overflows float64"),
        ([0], ["a"], TypeError, "priorities: expected real numbers"),
        ([0], [None], TypeError, "priorities: expected real numbers"),
        ([2**70], [1.0], ValueError, "indexes: expected a 1-d sequence of int64"),
        ([0], [1 + 2j], TypeError, "priorities: expected real numbers"),
    ],
)
def test_unreadable_list_arguments_name_the_argument(indexes, priorities, error, match):
    memory = filled(alpha=1.0, epsilon=0.0)
    before = memory.get_priorities()
    with pytest.raises(error, match=match):
        memory.update_priorities(indexes, priorities)
    assert torch.equal(memory.get_priorities(), before)
