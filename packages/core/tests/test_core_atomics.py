"""atomic_add refuses, on every backend, an array dtype the GPU has no atomic add for.

numba-cuda's ``cuda.atomic.add`` compiles only for int32, int64, uint32, uint64, float32
and float64 arrays (its typing template in numba/cuda/cudadecl.py). A kernel adding to a
bool, int8, int16 or float16 array used to run on cpu and in the simulator and then fail
to build for a GPU; now cpu (at typing), sim (at the call) and cuda (at typing) refuse it
with one message that names the dtype and the supported ones.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba.core.errors import TypingError

from core_test_kernels import agent_sum
from kernelgym.core import atomic_add
from kernelgym.core.device_functions import ATOMIC_ADD_DTYPES

SUPPORTED = [np.dtype(name) for name in ATOMIC_ADD_DTYPES]
UNSUPPORTED = [
    np.dtype(name) for name in ("bool", "int8", "int16", "uint8", "uint16", "float16", "complex64", "complex128")
]


@pytest.mark.gpu_compile
def test_the_supported_dtypes_are_numba_cudas_atomic_add_types():
    # the list the error quotes is the one the GPU compiler types atomic.add for
    from numba.cuda import cudadecl

    assert sorted(ATOMIC_ADD_DTYPES) == sorted(str(t) for t in cudadecl.all_numba_types)


def _assert_names_dtype_and_supported(error, dtype) -> None:
    text = str(error)
    assert f"dtype {dtype}" in text, text
    assert "supported dtypes: " + ", ".join(ATOMIC_ADD_DTYPES) in text, text


def _agent_values(dtype, num_envs, num_agents, data):
    """Values whose sums are exact in ``dtype`` (small integers, non-negative if unsigned)."""
    low = 0 if dtype.kind in "ub" else -8
    high = 1 if dtype.kind == "b" else 8
    values = data.draw(
        st.lists(st.integers(low, high), min_size=num_envs * num_agents, max_size=num_envs * num_agents), label="values"
    )
    start = data.draw(st.lists(st.integers(low, high), min_size=num_envs, max_size=num_envs), label="start")
    return (np.array(values).reshape(num_envs, num_agents).astype(dtype), np.array(start).astype(dtype))


@settings(max_examples=16, deadline=None)
@given(dtype=st.sampled_from(UNSUPPORTED), num_envs=st.integers(1, 3), num_agents=st.integers(1, 3), data=st.data())
def test_cpu_refuses_an_unsupported_dtype_at_typing(dtype, num_envs, num_agents, data):
    values, totals = _agent_values(dtype, num_envs, num_agents, data)
    before = totals.copy()
    with pytest.raises(TypingError) as raised:
        agent_sum.launch("cpu", num_envs, num_agents, values, totals)
    _assert_names_dtype_and_supported(raised.value, dtype)
    np.testing.assert_array_equal(totals, before)  # refused while compiling: nothing ran


@settings(max_examples=24, deadline=None)
@given(dtype=st.sampled_from(SUPPORTED), num_envs=st.integers(1, 4), num_agents=st.integers(1, 5), data=st.data())
def test_cpu_adds_every_supported_dtype(dtype, num_envs, num_agents, data):
    values, totals = _agent_values(dtype, num_envs, num_agents, data)
    expected = totals + values.sum(axis=1, dtype=dtype)
    agent_sum.launch("cpu", num_envs, num_agents, values, totals)
    assert totals.dtype == dtype
    np.testing.assert_array_equal(totals, expected)


@given(dtype=st.sampled_from(UNSUPPORTED))
def test_a_host_call_refuses_an_unsupported_dtype(dtype):
    array = np.zeros(2, dtype)
    with pytest.raises(TypeError) as raised:
        atomic_add(array, 0, 1)
    _assert_names_dtype_and_supported(raised.value, dtype)
    assert not array.any()


@given(dtype=st.sampled_from(SUPPORTED), start=st.integers(0, 9), value=st.integers(0, 9))
def test_a_host_call_adds_and_returns_the_old_value(dtype, start, value):
    array = np.full(2, start, dtype)
    assert atomic_add(array, 1, value) == start
    np.testing.assert_array_equal(array, np.array([start, start + value], dtype))


@pytest.mark.sim
@settings(max_examples=10, deadline=None)
@given(dtype=st.sampled_from(UNSUPPORTED), data=st.data())
def test_sim_refuses_an_unsupported_dtype(dtype, data):
    from numba import cuda

    values, totals = _agent_values(dtype, 2, 2, data)
    device_totals = cuda.to_device(totals)
    with pytest.raises(TypeError) as raised:
        agent_sum.launch("sim", 2, 2, cuda.to_device(values), device_totals)
    _assert_names_dtype_and_supported(raised.value, dtype)
    np.testing.assert_array_equal(device_totals.copy_to_host(), totals)


@pytest.mark.sim
@settings(max_examples=12, deadline=None)
@given(dtype=st.sampled_from(SUPPORTED), num_envs=st.integers(1, 3), num_agents=st.integers(1, 4), data=st.data())
def test_sim_adds_every_supported_dtype(dtype, num_envs, num_agents, data):
    from numba import cuda

    values, totals = _agent_values(dtype, num_envs, num_agents, data)
    expected = totals + values.sum(axis=1, dtype=dtype)
    device_totals = cuda.to_device(totals)
    agent_sum.launch("sim", num_envs, num_agents, cuda.to_device(values), device_totals)
    np.testing.assert_array_equal(device_totals.copy_to_host(), expected)


def _adds_to_the_first(totals, values):
    atomic_add(totals, 0, values[0])


@pytest.mark.gpu_compile
@pytest.mark.parametrize("dtype", UNSUPPORTED + SUPPORTED, ids=str)
def test_the_gpu_compiler_refuses_exactly_the_unsupported_dtypes(dtype):
    from numba import from_dtype, types

    from kernelgym.core import gpu_compile

    array = types.Array(from_dtype(dtype), 1, "C")
    build = gpu_compile.compile_kernel(_adds_to_the_first, (array, array), gpu_compile.TARGETS[-1])
    if dtype in SUPPORTED:
        assert build.ok, build.error
    else:
        assert not build.ok and build.error.startswith("TypingError"), build.error
        _assert_names_dtype_and_supported(build.error, dtype)
