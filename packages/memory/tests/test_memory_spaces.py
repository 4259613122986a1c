"""Tensor sizes from ints, tuples and (duck-typed) gymnasium spaces."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from kernelgym.memory import RandomMemory, sample_shape


@pytest.mark.parametrize(
    "size, keep, expected",
    [
        (3, False, (3,)),
        (3, True, (3,)),
        (4.0, False, (4,)),
        ((2, 3), False, (6,)),
        ([2, 3], True, (2, 3)),
        (SimpleNamespace(n=5, shape=()), False, (1,)),  # Discrete
        (SimpleNamespace(nvec=np.array([3, 4, 5]), shape=(3,)), False, (3,)),  # MultiDiscrete
        (SimpleNamespace(shape=(2, 3), low=0, high=1), True, (2, 3)),  # Box
        (SimpleNamespace(shape=(2, 3), low=0, high=1), False, (6,)),
        (SimpleNamespace(spaces={"a": SimpleNamespace(shape=(2,)), "b": SimpleNamespace(n=3, shape=())}), False, (3,)),
        (SimpleNamespace(spaces=(SimpleNamespace(shape=(2, 2)), SimpleNamespace(shape=(1,)))), False, (5,)),
    ],
)
def test_sample_shapes(size, keep, expected):
    assert sample_shape(size, keep) == expected


def test_composite_spaces_cannot_keep_dimensions():
    with pytest.raises(ValueError, match="keep_dimensions"):
        sample_shape(SimpleNamespace(spaces={"a": SimpleNamespace(shape=(2,))}), True)


def test_gymnasium_spaces_when_installed():
    spaces = pytest.importorskip("gymnasium.spaces")
    memory = RandomMemory(3, 2, device="cpu")
    memory.create_tensor("obs", spaces.Box(-1, 1, (4, 2)), keep_dimensions=True)
    memory.create_tensor("action", spaces.Discrete(3), torch.int64)
    memory.create_tensor("both", spaces.Dict({"x": spaces.Box(0, 1, (3,)), "y": spaces.MultiDiscrete([2, 2])}))
    assert memory.get_tensor_by_name("obs").shape == (3, 2, 4, 2)
    assert memory.get_tensor_by_name("action").shape == (3, 2, 1)
    assert memory.get_tensor_by_name("both").shape == (3, 2, 5)
