"""``device_function(inline="never")``: a helper compiled once as a function of its own.

Numba's IR inlining copies a helper's whole IR into every call site; for the MinAtar games
(issue 28) that made one launcher's compile take minutes. A never-inlined helper must give
the same bits as the inlined one on every backend: same error model (a division by zero
gives inf/NaN or 0), same writes through its array arguments, same returned tuples.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kernelgym.core import bind, device_function, env_kernel, gpu_compile, to_numpy
from kernelgym.core.arrays import to_backend
from kernelgym.core.binding import PARALLEL_FROM


def _shift_and_divide(i, table, x, y):
    # moves row i's entries one place left (a loop writing through an array argument), and
    # returns a quotient that is inf/NaN for y == 0 and an integer one that is 0 for b == 0
    total = 0
    for k in range(table.shape[1] - 1):
        table[i, k] = table[i, k + 1]
        total += table[i, k]
    return x[i] / y[i], total // table[i, 0]


_inlined = device_function(_shift_and_divide)
_separate = device_function(inline="never")(_shift_and_divide)


@device_function(inline="never")
def _calls_a_separate_helper(i, table, x, y):
    # a never-inlined helper calling another: each is compiled once, on its own
    return _separate(i, table, x, y)


@env_kernel
def both_ways(i, inlined_table, separate_table, x, y, inlined_out, separate_out, inlined_int, separate_int):
    inlined_out[i], inlined_int[i] = _inlined(i, inlined_table, x, y)
    separate_out[i], separate_int[i] = _calls_a_separate_helper(i, separate_table, x, y)


FLOATS = st.floats(-1e3, 1e3, allow_nan=False) | st.sampled_from([0.0, -0.0, 1.0])


@st.composite
def _inputs(draw, sizes):
    n = draw(sizes)
    table = draw(hnp.arrays(np.int64, (n, 4), elements=st.integers(-5, 5)))
    x = draw(hnp.arrays(np.float64, n, elements=FLOATS))
    y = draw(hnp.arrays(np.float64, n, elements=FLOATS))
    return table, x, y


def _run(backend, table, x, y):
    n = len(x)
    values = {
        "inlined_table": table.copy(),
        "separate_table": table.copy(),
        "x": x,
        "y": y,
        "inlined_out": np.zeros(n),
        "separate_out": np.zeros(n),
        "inlined_int": np.zeros(n, np.int64),
        "separate_int": np.zeros(n, np.int64),
    }
    values = {name: to_backend(value, backend) for name, value in values.items()}
    bind(both_ways, values, backend=backend, num_envs=n)()
    return {name: to_numpy(value) for name, value in values.items()}


def _assert_the_same(got, table, x, y):
    for name in ("table", "out", "int"):
        np.testing.assert_array_equal(got[f"separate_{name}"], got[f"inlined_{name}"], err_msg=name)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got["separate_out"], x / y)
    np.testing.assert_array_equal(got["separate_table"][:, :-1], table[:, 1:])


@settings(max_examples=20, deadline=None)
@given(_inputs(st.integers(1, PARALLEL_FROM - 1) | st.integers(PARALLEL_FROM, 2 * PARALLEL_FROM)))
def test_a_never_inlined_helper_gives_the_bits_of_the_inlined_one(inputs):
    # the serial and the parallel cpu launchers, each calling the helper compiled once
    _assert_the_same(_run("cpu", *inputs), *inputs)


def test_the_option_reaches_numba():
    assert _inlined.targetoptions["inline"] == "always"
    assert _separate.targetoptions["inline"] == "never"
    assert _separate.targetoptions["error_model"] == "numpy"


@pytest.mark.parametrize("inline", ["sometimes", None, True, "Always"])
def test_an_unknown_inline_choice_is_refused(inline):
    with pytest.raises(ValueError, match=r"device_function inline: expected one of \('always', 'never'\), got "):
        device_function(_shift_and_divide, inline=inline)


def test_a_non_function_is_refused():
    with pytest.raises(TypeError, match="device_function fn: expected a function, got int 3"):
        device_function(3)


@pytest.mark.sim
@settings(max_examples=5, deadline=None)
@given(_inputs(st.integers(1, 6)))
def test_the_simulator_runs_it_as_the_cpu_does(inputs):
    got = _run("sim", *inputs)
    _assert_the_same(got, *inputs)
    for name, value in _run("cpu", *inputs).items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)


@pytest.mark.gpu_compile
@pytest.mark.parametrize("cc", gpu_compile.TARGETS, ids=gpu_compile.target_name)
def test_it_compiles_for_the_gpu(cc):
    table, x, counts = np.zeros((3, 4), np.int64), np.ones(3), np.zeros(3, np.int64)
    both_ways.launch("cpu", 3, table, table.copy(), x, x, x.copy(), x.copy(), counts, counts.copy())
    module = both_ways._module(8)
    build = gpu_compile.compile_kernel(module.cuda_launcher.py_func, module.cpu_launcher.signatures[0], cc)
    assert build.passed, build.problems
    assert build.registers is not None and build.registers > 0
