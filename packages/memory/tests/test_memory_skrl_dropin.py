"""What skrl's own agents ask of a memory: `size=None` tensors and exact dtype casts.

skrl 2.1.1's PPO creates `states` with `size=None` when the env has no state space and
stores int64 discrete actions into a float32 tensor. The behaviour against skrl's own
memory as the reference model is in tests/clients/test_skrl_memory_model.py.
"""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgym.memory import PrioritizedMemory, RandomMemory, SequenceMemory

DTYPES = {
    torch.bool: np.bool_,
    torch.uint8: np.uint8,
    torch.int32: np.int32,
    torch.int64: np.int64,
    torch.float16: np.float16,
    torch.float32: np.float32,
    torch.float64: np.float64,
}


def numpy_exact(values: np.ndarray, target) -> bool:
    """The reference rule, in numpy: every value survives the round trip to `target` and back."""
    with np.errstate(all="ignore"):
        back = values.astype(target).astype(values.dtype)
    same = back == values
    if values.dtype.kind == "f":
        same |= np.isnan(values) & np.isnan(back)
    return bool(same.all())


@st.composite
def values_and_target(draw):
    source = draw(st.sampled_from(sorted(DTYPES, key=str)))
    target = draw(st.sampled_from([t for t in DTYPES if t != source]))
    kind = np.dtype(DTYPES[source]).kind
    if kind == "b":
        element = st.booleans()
    elif kind in "iu":
        info = np.iinfo(DTYPES[source])
        # near 0, near 2**24 (float32's last exact integers) and anywhere in range
        low, high = int(info.min), int(info.max)
        element = st.one_of(
            st.integers(max(low, -300), min(high, 300)),
            st.integers(min(max(low, 2**24 - 3), high), min(high, 2**24 + 3)),
            st.integers(low, high),
        )
    else:
        width = np.finfo(DTYPES[source]).bits
        element = st.one_of(
            st.integers(-300, 300).map(float),
            st.floats(width=width, allow_nan=True, allow_infinity=True),
        )
    values = draw(st.lists(element, min_size=2, max_size=2))
    return torch.tensor(np.array(values, dtype=DTYPES[source])), target


@settings(max_examples=300, deadline=None)
@given(values_and_target())
def test_a_cast_is_stored_exactly_when_every_value_survives_it(case):
    values, target = case
    memory = RandomMemory(2, 2, device="cpu", seed=0)
    memory.create_tensor("x", 1, target)
    expected_exact = numpy_exact(values.numpy(), DTYPES[target])
    if expected_exact:
        memory.add_samples(x=values)
        stored = memory.get_tensor_by_name("x")[0, :, 0]
        assert stored.dtype == target
        assert numpy_exact(stored.numpy(), DTYPES[values.dtype])  # and it reads back as the input
        assert torch.equal(stored.to(values.dtype).nan_to_num(), values.nan_to_num())
        assert len(memory) == 2
    else:
        with pytest.raises(TypeError, match=rf"'x' holds {target}; .* \({values.dtype}\) is not exactly"):
            memory.add_samples(x=values)
        assert len(memory) == 0


def test_discrete_actions_from_skrl_are_stored_into_float32():
    memory = RandomMemory(3, 2, device="cpu", seed=0)
    memory.create_tensor("actions", 1, torch.float32)
    memory.add_samples(actions=torch.tensor([[0], [1]], dtype=torch.int64))
    assert memory.get_tensor_by_name("actions")[0].tolist() == [[0.0], [1.0]]


def test_a_lossy_cast_names_the_tensor_and_the_value_and_writes_nothing():
    memory = RandomMemory(3, 2, device="cpu", seed=0)
    memory.create_tensor("actions", 1, torch.float32)
    memory.create_tensor("rewards", 1, torch.float32)
    with pytest.raises(TypeError, match=r"'actions' holds torch.float32; 16777217 \(torch.int64\)"):
        memory.add_samples(rewards=torch.ones(2, 1), actions=torch.tensor([[2], [2**24 + 1]], dtype=torch.int64))
    assert len(memory) == 0 and torch.isnan(memory.get_tensor_by_name("rewards")).all()


@pytest.mark.parametrize("cls", [RandomMemory, SequenceMemory, PrioritizedMemory])
def test_a_size_none_tensor_is_skipped_and_sampled_as_none(cls):
    memory = cls(4, 2, device="cpu", seed=0)
    assert memory.create_tensor("obs", 3) is True
    assert memory.create_tensor("states", None) is False
    assert memory.get_tensor_names() == ("obs",)
    memory.add_samples(obs=torch.ones(2, 3), states=None)
    memory.add_samples(obs=torch.ones(2, 3), states=torch.zeros(2, 5))  # skipped, whatever it holds
    for batch in memory.sample(["obs", "states"], 4, mini_batches=2):
        assert batch[1] is None and batch[0].shape[-1] == 3
    for batch in memory.sample_all(["states", "obs"], mini_batches=2):
        assert batch[0] is None and batch[1].shape == (2, 3)
    assert memory.sample_by_index(["states"], [0, 1])[0] == [None]


def test_a_size_none_name_can_later_be_created_for_real():
    memory = RandomMemory(4, 2, device="cpu", seed=0)
    memory.create_tensor("states", None)
    assert memory.create_tensor("states", 2) is True
    memory.add_samples(states=torch.ones(2, 2))
    assert torch.equal(memory.sample_all(["states"])[0][0], torch.ones(2, 2))
    assert memory.create_tensor("states", None) is False  # the real tensor stays
    assert memory.sample_all(["states"])[0][0] is not None


def test_an_unknown_name_still_warns_but_a_size_none_name_does_not(recwarn):
    memory = RandomMemory(4, 2, device="cpu", seed=0)
    memory.create_tensor("obs", 1)
    memory.create_tensor("states", None)
    memory.add_samples(obs=torch.ones(2, 1), states=torch.ones(2, 1))
    assert not recwarn.list
    with pytest.warns(UserWarning, match="no tensor 'typo'"):
        memory.add_samples(obs=torch.ones(2, 1), typo=torch.ones(2, 1))
