"""`kernelgym.core.portable_math`: accurate against the math library, the same bits on every backend."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core_test_kernels import portable_sines, portable_sines_float32
from kernelgym.core import gpu_compile
from kernelgym.core.portable_math import cos, cos_as, sin, sin_as, sincos, sincos_as

# the range the module's docstring promises 2 ulp in
LIMIT = 2.0**19 * math.pi
angles = st.floats(-LIMIT, LIMIT, allow_nan=False)


def _ulps(got: float, want: float) -> float:
    return abs(got - want) / np.spacing(abs(want)) if got != want else 0.0


@settings(max_examples=2000, deadline=None)
@given(angles)
def test_float64_within_two_ulp_of_the_math_library(x):
    assert _ulps(sin(x), math.sin(x)) <= 2.0
    assert _ulps(cos(x), math.cos(x)) <= 2.0
    assert sincos(x) == (sin(x), cos(x))


@settings(max_examples=500, deadline=None)
@given(st.integers(1, 2**20 - 1), st.integers(-2, 2))
def test_accurate_next_to_the_zeros(multiple, step):
    # where sin or cos is near 0 a careless reduction by pi/2 loses every bit
    x = multiple * (math.pi / 2)
    for _ in range(abs(step)):
        x = math.nextafter(x, math.copysign(math.inf, step))
    assert _ulps(sin(x), math.sin(x)) <= 2.0
    assert _ulps(cos(x), math.cos(x)) <= 2.0


@settings(max_examples=2000, deadline=None)
@given(st.floats(-1e4, 1e4, width=32, allow_nan=False))
def test_rounded_to_float32_within_one_ulp_of_the_rounded_library_value(x):
    x = np.float32(x)
    for portable, library in ((sin, math.sin), (cos, math.cos)):
        got, want = np.float32(portable(x)), np.float32(library(float(x)))
        assert abs(float(got) - float(want)) <= float(np.spacing(np.abs(want)))


@settings(max_examples=2000, deadline=None)
@given(st.floats(-65536, 65536, width=32))
def test_float32_arithmetic_within_the_stated_absolute_error(x):
    x = np.float32(x)
    got = sincos_as(x, np.float32)
    bound = 1.2e-7 if abs(x) <= 1024 else 1e-6
    for value, library in zip(got, (math.sin, math.cos)):
        assert abs(float(value) - library(float(x))) <= bound
    assert (sin_as(x, np.float32), cos_as(x, np.float32)) == got


@settings(max_examples=100, deadline=None)
@given(st.floats(65536, float(np.finfo(np.float32).max), width=32, exclude_min=True), st.booleans())
def test_float32_beyond_the_range_gives_nan(x, negative):
    x = np.float32(-x if negative else x)
    assert all(math.isnan(value) for value in sincos_as(x, np.float32))


@settings(max_examples=300, deadline=None)
@given(angles)
def test_float64_as_is_the_float64_functions(x):
    assert sincos_as(x, np.float64) == sincos(x)


@pytest.mark.parametrize("x", [math.nan, math.inf, -math.inf, 2.0**51, -1e30])
@pytest.mark.parametrize("real", [np.float64, np.float32])
def test_nan_infinity_and_arguments_too_large_to_reduce_give_nan(x, real):
    assert all(math.isnan(value) for value in sincos(x))
    assert all(math.isnan(value) for value in sincos_as(real(x), real))


# (kernel, input dtype): float64 sincos of float64 and float32 inputs, float32 sincos_as
CASES = [(portable_sines, np.float64), (portable_sines, np.float32), (portable_sines_float32, np.float32)]
CASE_IDS = ["sincos-float64", "sincos-float32", "sincos_as-float32"]


def _sines(backend, kernel, x):
    from kernelgym.core.arrays import to_backend

    out = np.zeros((x.size, 2), x.dtype)
    if backend == "cpu":
        kernel.launch("cpu", x.size, x, out)
        return out
    device_out = to_backend(out, backend)
    kernel.launch(backend, x.size, to_backend(x, backend), device_out)
    return device_out.copy_to_host()


def _inputs(seed, size, dtype):
    # both sides of sincos_as's float32 limit (1024)
    return np.random.default_rng(seed).uniform(-2000.0, 2000.0, size).astype(dtype)


@pytest.mark.parametrize("kernel, dtype", CASES, ids=CASE_IDS)
def test_a_cpu_kernel_gives_the_reference_bits(kernel, dtype):
    x = _inputs(0, 4096, dtype)
    if kernel is portable_sines:
        want = np.array([sincos(value) for value in x], dtype=dtype)
    else:
        want = np.array([sincos_as(value, np.float32) for value in x], dtype=dtype)
    np.testing.assert_array_equal(_sines("cpu", kernel, x), want)


@pytest.mark.sim
@pytest.mark.parametrize("kernel, dtype", CASES, ids=CASE_IDS)
def test_the_simulator_gives_the_cpu_bits(kernel, dtype):
    x = _inputs(1, 512, dtype)
    np.testing.assert_array_equal(_sines("sim", kernel, x), _sines("cpu", kernel, x))


@pytest.mark.gpu
@pytest.mark.parametrize("kernel, dtype", CASES, ids=CASE_IDS)
def test_a_gpu_gives_the_cpu_bits(kernel, dtype):
    x = _inputs(2, 100_000, dtype)
    np.testing.assert_array_equal(_sines("cuda", kernel, x), _sines("cpu", kernel, x))


@pytest.mark.gpu_compile
@pytest.mark.parametrize("cc", gpu_compile.TARGETS, ids=gpu_compile.target_name)
@pytest.mark.parametrize("kernel", [portable_sines, portable_sines_float32], ids=["sincos", "sincos_as-float32"])
def test_the_gpu_build_calls_no_libdevice_function_and_fuses_nothing(cc, kernel):
    from numba import cuda

    from kernelgym.core.device_functions import register_cuda_overloads

    x = np.ones(3, np.float32)
    kernel.launch("cpu", 3, x, np.zeros((3, 2), np.float32))
    module = kernel._module(2)
    register_cuda_overloads()
    with gpu_compile._device_capability_answered_with(cc):
        ptx, _ = cuda.compile_ptx(module.cuda_launcher.py_func, module.cpu_launcher.signatures[-1], cc=cc)
    assert "__nv_" not in ptx
    assert "fma.rn" not in ptx
    assert "mul.rn.f32" in ptx if kernel is portable_sines_float32 else "mul.rn.f64" in ptx
