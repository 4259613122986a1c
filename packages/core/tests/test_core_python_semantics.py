"""A kernel's Python source (the simulator, the kit's replays) computes what numba compiles.

`numba_semantics` gives the Python function numba's typing of float literals, min/max and
math, and NaN/inf instead of math's errors; each property compares it with the same
function compiled by numba, bit for bit.
"""

import math

import numba
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgym.core.python_semantics import numba_semantics

floats32 = st.floats(-4.0, 4.0, width=32).map(np.float32)


def clip_then_square(u):
    v = min(max(u, -1.0), 1.0)
    return 0.01 * v * v


def square_root(x):
    return math.sqrt(x - 1.0)


def exponential(x):
    return math.exp(x)


def _bits(value) -> bytes:
    return np.float64(value).tobytes()


@settings(max_examples=40, deadline=None)
@given(u=floats32)
def test_the_clip_pattern_is_float64_on_both_branches_as_compiled(u):
    python = numba_semantics(clip_then_square)(u)
    assert isinstance(python, np.float64), type(python)
    assert _bits(python) == _bits(numba.njit(clip_then_square)(u))


@settings(max_examples=40, deadline=None)
@given(x=st.floats(-3.0, 3.0))
def test_a_square_root_of_a_negative_is_nan_as_compiled(x):
    python = numba_semantics(square_root)(x)
    compiled = numba.njit(error_model="numpy")(square_root)(x)
    assert (math.isnan(python) and math.isnan(compiled)) or _bits(python) == _bits(compiled)


def test_an_overflow_is_inf_and_float32_stays_float32():
    assert numba_semantics(exponential)(1000.0) == math.inf
    assert isinstance(numba_semantics(square_root)(np.float32(5.0)), np.float64)  # x - 1.0 is float64
    assert isinstance(numba_semantics(lambda x: math.sqrt(x))(np.float32(4.0)), np.float32)


def test_the_made_function_is_cached_and_the_original_untouched():
    made = numba_semantics(clip_then_square)
    assert made is numba_semantics(clip_then_square)  # cached per function
    assert type(clip_then_square(np.float32(0.5))) is np.float32  # the original keeps Python's typing
    assert made.__qualname__ == clip_then_square.__qualname__
