"""Launch arguments refused before any kernel runs (issue 36, class 3): a tensor that requires
grad, and a fault record with no element for the launch to write."""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgym.core import BindingError, bind, env_kernel
from kernelgym.core.binding import NO_FAULT, Precondition


@env_kernel
def negative_index(i, x):
    if x[i] < 0:
        return i
    return -1


@env_kernel
def double_in_place(i, x):
    x[i] = 2 * x[i]


@settings(max_examples=5, deadline=None)
@given(shape=st.sampled_from([(0,), (0, 1), (2, 0)]))
def test_a_fault_record_with_no_element_is_refused_at_bind(shape):
    x = np.ones(4)
    expected = rf"Precondition fault 'fault': expected a one-element array .*shape {re.escape(str(shape))}"
    with pytest.raises(BindingError, match=expected):
        bind(
            [Precondition(negative_index, "fault"), double_in_place],
            {"x": x, "fault": np.zeros(shape, np.int64)},
            backend="cpu",
            num_envs=4,
            layouts={"fault": "shared"},
        )
    assert (x == 1).all()  # nothing ran


def test_a_one_element_fault_record_is_taken():
    x = np.array([1.0, -1.0, 2.0])
    fault = np.array([NO_FAULT], np.int64)
    launch = bind(
        [Precondition(negative_index, "fault"), double_in_place],
        {"x": x, "fault": fault},
        backend="cpu",
        num_envs=3,
        layouts={"fault": "shared"},
    )
    assert launch() == 1 and x.tolist() == [1.0, -1.0, 2.0]


def test_a_tensor_that_requires_grad_is_refused_for_a_launch():
    torch = pytest.importorskip("torch")
    leaf = torch.ones(4, requires_grad=True)
    with pytest.raises(TypeError, match=r"value 'x': expected a tensor that does not require grad .*tensor.detach\(\)"):
        bind(double_in_place, {"x": leaf}, backend="cpu", num_envs=4)
    assert leaf.detach().tolist() == [1.0] * 4
    detached = leaf.detach()
    bind(double_in_place, {"x": detached}, backend="cpu", num_envs=4)()
    assert leaf.detach().tolist() == [2.0] * 4  # the detached view shares the storage: written
