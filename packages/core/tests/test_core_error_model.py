"""A division by zero in an env body follows the GPU on every backend: inf/NaN, no exception.

numba-cuda compiles kernels with numba's ``error_model="numpy"``: a float division by
zero writes inf or NaN and an integer one 0, silently. The cpu launchers used Numba's
default ("python") model, so the serial launcher (fewer than PARALLEL_FROM envs) raised
ZeroDivisionError from binding.py, while the parallel one (a parfor, numpy model) wrote
inf/NaN. Every cpu launcher and device function now uses the numpy model, and the
simulator runs the Python source with numpy scalars, its float errors ignored and its
njit helpers compiled with the numpy model.
"""

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kernelgym.core import agent_kernel, bind, device_function, env_kernel, to_numpy
from kernelgym.core.arrays import to_backend
from kernelgym.core.binding import PARALLEL_FROM

# numerators, and denominators that are often zero (of either sign)
FLOATS = st.floats(-1e3, 1e3, allow_nan=False) | st.sampled_from([0.0, -0.0, 1.0])
DENOMINATORS = st.sampled_from([0.0, -0.0]) | FLOATS
INTEGERS = st.integers(-1000, 1000)
INT_DENOMINATORS = st.just(0) | INTEGERS


@numba.njit(inline="always")
def _quotient(a, b):
    return a / b


@device_function
def _scaled_ratio(x, y, i, scale):
    return scale * x[i] / y[i]


@env_kernel
def divide(i, x, y, a, b, ratio, helper_ratio, scaled, quotient, remainder, constant, scale, zero):
    ratio[i] = x[i] / y[i]
    helper_ratio[i] = _quotient(x[i], y[i])
    scaled[i] = _scaled_ratio(x, y, i, scale)
    quotient[i] = a[i] // b[i]
    remainder[i] = a[i] % b[i]
    # two bound constants: Python floats in the simulator, float64 constants on the cpu
    constant[i] = scale / zero


@agent_kernel
def divide_per_agent(env, agent, num_agents, x, y, ratio):
    ratio[env, agent] = x[env, agent] / y[env, agent]


OUTPUTS = ("ratio", "helper_ratio", "scaled", "quotient", "remainder", "constant")


def _expected(x, y, a, b, scale):
    """What the GPU writes: numpy's results with its floating-point errors ignored."""
    with np.errstate(all="ignore"):
        return {
            "ratio": x / y,
            "helper_ratio": x / y,
            "scaled": scale * x / y,
            "quotient": a // b,
            "remainder": a % b,
            "constant": np.full(len(x), np.float64(scale) / np.float64(0.0)),
        }


def _run(backend, x, y, a, b, scale):
    n = len(x)
    values = {
        "x": x,
        "y": y,
        "a": a,
        "b": b,
        **{name: np.zeros(n) for name in OUTPUTS[:3]},
        "quotient": np.zeros(n, np.int64),
        "remainder": np.zeros(n, np.int64),
        "constant": np.zeros(n),
    }
    values = {name: to_backend(value, backend) for name, value in values.items()}
    bind(divide, {**values, "scale": scale, "zero": 0.0}, backend=backend, num_envs=n)()
    return {name: to_numpy(values[name]) for name in OUTPUTS}


@st.composite
def _inputs(draw, sizes):
    n = draw(sizes)
    x = draw(hnp.arrays(np.float64, n, elements=FLOATS))
    y = draw(hnp.arrays(np.float64, n, elements=DENOMINATORS))
    a = draw(hnp.arrays(np.int64, n, elements=INTEGERS))
    b = draw(hnp.arrays(np.int64, n, elements=INT_DENOMINATORS))
    # at least one 0/0, x/0 and a//0 in every batch
    x[0], y[0], b[0] = 0.0, 0.0, 0
    if n > 1:
        x[1], y[1] = 1.0, 0.0
    return x, y, a, b, draw(st.sampled_from([1.0, -2.5, 0.0]))


def _assert_gpu_results(got, x, y, a, b, scale):
    for name, want in _expected(x, y, a, b, scale).items():
        # NaN exactly where numpy gives NaN, infs of the same sign
        np.testing.assert_array_equal(got[name], want, err_msg=name)


@settings(max_examples=30, deadline=None)
@given(_inputs(st.integers(1, PARALLEL_FROM - 1)))
def test_the_serial_cpu_launcher_writes_inf_and_nan(inputs):
    # raised ZeroDivisionError (from binding.py) before
    _assert_gpu_results(_run("cpu", *inputs), *inputs)


@settings(max_examples=10, deadline=None)
@given(_inputs(st.integers(PARALLEL_FROM, 3 * PARALLEL_FROM)))
def test_the_parallel_cpu_launcher_writes_the_same(inputs):
    _assert_gpu_results(_run("cpu", *inputs), *inputs)


@given(st.integers(1, 6), st.integers(1, 4))
def test_a_serial_agent_launch_writes_inf_and_nan(num_envs, num_agents):
    x = np.arange(num_envs * num_agents, dtype=np.float64).reshape(num_envs, num_agents) - 1.0
    y = np.zeros_like(x)
    ratio = np.zeros_like(x)
    bind(divide_per_agent, {"x": x, "y": y, "ratio": ratio}, backend="cpu", num_envs=num_envs, num_agents=num_agents)()
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(ratio, x / y)


@given(FLOATS, st.sampled_from([0.0, -0.0]))
def test_a_device_function_called_from_python_divides_as_the_gpu(x, zero):
    # compiled on its own (not inlined): raised ZeroDivisionError before
    with np.errstate(all="ignore"):
        want = np.float64(x) / np.float64(zero)
    got = _scaled_ratio(np.array([x]), np.array([zero]), 0, 1.0)
    np.testing.assert_array_equal(got, want)


@pytest.mark.sim
@settings(max_examples=10, deadline=None)
@given(_inputs(st.integers(1, 8)))
def test_the_simulator_writes_the_same_as_the_cpu(inputs):
    # the njit helper ran compiled with numba's python error model in the simulator:
    # ZeroDivisionError before
    got = _run("sim", *inputs)
    _assert_gpu_results(got, *inputs)
    for name, value in _run("cpu", *inputs).items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)
