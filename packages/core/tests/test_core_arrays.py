"""Zero-copy views: to_torch, to_numpy and to_dlpack alias the backend arrays."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kernelgym.core import to_dlpack, to_numpy, to_torch
from kernelgym.core.arrays import to_backend

# dtypes torch.from_numpy accepts
DTYPES = st.sampled_from([np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.bool_])
ARRAYS = DTYPES.flatmap(lambda dtype: hnp.arrays(dtype, hnp.array_shapes(min_dims=1, max_dims=4, max_side=5)))


def _check_aliasing(backend_array):
    host = to_numpy(backend_array)
    tensor = to_torch(backend_array)
    assert tuple(tensor.shape) == host.shape
    np.testing.assert_array_equal(tensor.numpy(), host)
    # a write through torch shows in the backend array, and the other way round
    flat = tensor.view(-1)
    flat[0] = 1
    assert to_numpy(backend_array).reshape(-1)[0] == 1
    host.reshape(-1)[-1] = 0
    assert flat[-1].item() == 0


@settings(max_examples=25)
@given(ARRAYS)
def test_cpu_views_alias_the_array(values):
    array = to_backend(values, "cpu")
    assert to_numpy(array) is array
    assert to_torch(array).data_ptr() == array.ctypes.data
    _check_aliasing(array)


@settings(max_examples=25)
@given(ARRAYS)
def test_dlpack_round_trip_is_zero_copy(values):
    array = to_backend(values, "cpu")
    tensor = torch.utils.dlpack.from_dlpack(to_dlpack(array))
    assert tensor.data_ptr() == array.ctypes.data
    np.testing.assert_array_equal(tensor.numpy(), values)


def test_non_arrays_are_refused_with_the_argument_name():
    with pytest.raises(TypeError, match="array: expected"):
        to_torch([1, 2, 3])
    with pytest.raises(TypeError, match="array: expected"):
        to_numpy("x")


@pytest.mark.sim
@settings(max_examples=15)
@given(ARRAYS)
def test_sim_views_alias_the_simulator_buffer(values):
    array = to_backend(values, "sim")
    assert not isinstance(array, np.ndarray)
    np.testing.assert_array_equal(array.copy_to_host(), values)
    _check_aliasing(array)
    tensor = torch.utils.dlpack.from_dlpack(to_dlpack(array))
    assert tensor.data_ptr() == to_numpy(array).ctypes.data


@settings(max_examples=25, deadline=None)
@given(ARRAYS, st.integers(2, 40))
def test_cpu_arrays_start_on_distinct_cache_lines_of_a_page(values, count):
    """Same-size cpu arrays allocated in a row hold the values, start on a cache line, and
    no two of 64 in a row share their offset in a 4 KiB page (no L1-set or 4K-alias pileup)."""
    arrays = [to_backend(values, "cpu") for _ in range(count)]
    for array in arrays:
        np.testing.assert_array_equal(array, values)
        assert array.dtype == values.dtype and array.flags.c_contiguous and array.flags.writeable
    offsets = [array.ctypes.data % 4096 for array in arrays]
    assert all(offset % 64 == 0 for offset in offsets)
    assert len(set(offsets)) == min(count, 64)
