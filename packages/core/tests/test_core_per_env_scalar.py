"""`PerEnvScalar`: a body bound to one receives its env's entry, in both layouts, on cpu and sim."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kernelgym.core import BindingError, Branch, agent_kernel, bind, bind_launches, env_kernel, to_numpy
from kernelgym.core.arrays import to_backend
from kernelgym.core.binding import PerEnvScalar

FINITE = st.floats(-1e6, 1e6, allow_nan=False)
VECTORS = hnp.arrays(np.float64, st.integers(1, 300), elements=FINITE)


@env_kernel
def scaled(i, x, out, scale, shift):
    """``scale`` and ``shift`` are scalars to the body, whatever they are bound to."""
    out[i] = x[i] * scale + shift


@agent_kernel
def scaled_agents(env, agent, num_agents, x, out, scale):
    out[env, agent] = x[env, agent] * scale


def _run(backend, x, scale, shift):
    values = {"x": to_backend(x, backend), "out": to_backend(np.zeros_like(x), backend), "scale": scale, "shift": shift}
    bind(scaled, values, backend=backend, num_envs=x.shape[0])()
    return to_numpy(values["out"])


@settings(max_examples=25, deadline=None)
@given(VECTORS, st.data())
def test_each_env_gets_its_own_entry_bit_for_bit(x, data):
    n = x.shape[0]
    scales = data.draw(hnp.arrays(np.float64, n, elements=FINITE))
    shift = data.draw(FINITE)
    got = _run("cpu", x, PerEnvScalar(scales), shift)
    assert got.tobytes() == (x * scales + shift).tobytes()
    # the same as binding each env's scale as a constant
    for i in range(min(n, 3)):
        assert got[i] == _run("cpu", x[i : i + 1], float(scales[i]), shift)[0]


def test_writing_the_array_between_launches_changes_the_value_without_rebinding():
    x, scales = np.arange(200.0), np.ones(200)
    values = {"x": x, "out": np.zeros(200), "scale": PerEnvScalar(scales), "shift": 0.0}
    launch = bind(scaled, values, backend="cpu", num_envs=200)
    launch()
    np.testing.assert_array_equal(values["out"], x)
    scales[:] = np.linspace(0.0, 2.0, 200)
    launch()
    np.testing.assert_array_equal(values["out"], x * scales)


def test_agent_layout_and_branches_index_by_env():
    x = np.arange(12.0).reshape(4, 3)
    scales = np.array([1.0, 2.0, 3.0, 4.0])
    values = {"x": x, "out": np.zeros_like(x), "scale": PerEnvScalar(scales)}
    bind(scaled_agents, values, backend="cpu", num_envs=4, num_agents=3)()
    np.testing.assert_array_equal(values["out"], x * scales[:, None])
    mask = np.array([True, False, True, False])
    flat = {
        "x": x[:, 0].copy(),
        "out": np.zeros(4),
        "scale": PerEnvScalar(scales),
        "shift": PerEnvScalar(-scales),
        "mask": mask,
    }
    bind_launches([[Branch("mask", then=[scaled])]], flat, backend="cpu", num_envs=4)()
    np.testing.assert_array_equal(flat["out"], np.where(mask, x[:, 0] * scales - scales, 0.0))


@pytest.mark.parametrize(
    "array, message",
    [
        (np.ones(3), r"at least num_envs \(4\) entries, got shape \(3,\)"),
        (np.ones((4, 2)), r"a 1-D array .* got shape \(4, 2\)"),
        (2.0, "got a scalar"),
    ],
)
def test_bad_arrays_are_refused_at_bind_time_naming_the_value(array, message):
    values = {"x": np.ones(4), "out": np.zeros(4), "scale": PerEnvScalar(array), "shift": 0.0}
    with pytest.raises(ValueError, match=r"value 'scale': .*" + message):
        bind(scaled, values, backend="cpu", num_envs=4)


def test_a_per_env_scalar_cannot_be_a_per_call_value():
    values = {"x": np.ones(4), "out": np.zeros(4), "scale": PerEnvScalar(np.ones(4)), "shift": 0.0}
    with pytest.raises(BindingError, match="per_call: names \\['scale'\\] are PerEnvScalar"):
        bind(scaled, values, backend="cpu", num_envs=4, per_call=("scale",))


@pytest.mark.sim
@settings(max_examples=5, deadline=None)
@given(hnp.arrays(np.float64, st.integers(1, 20), elements=FINITE), st.data())
def test_sim_equals_cpu(x, data):
    scales = data.draw(hnp.arrays(np.float64, x.shape[0], elements=FINITE))
    sim = _run("sim", x, PerEnvScalar(to_backend(scales, "sim")), 1.5)
    assert sim.tobytes() == _run("cpu", x, PerEnvScalar(scales), 1.5).tobytes()


def test_a_stride_of_zero_gives_every_env_entry_zero_and_one_gives_its_own():
    # stride 0 promises that the envs agree; the cpu launch then reads entry 0 once (shown here by breaking it)
    x, scales, stride = np.arange(300.0), np.linspace(1.0, 2.0, 300), np.zeros(1, np.int64)
    values = {"x": x, "out": np.zeros(300), "scale": PerEnvScalar(scales, stride), "shift": 0.0}
    launch = bind(scaled, values, backend="cpu", num_envs=300)
    launch()
    np.testing.assert_array_equal(values["out"], x * scales[0])
    stride[0] = 1
    launch()
    np.testing.assert_array_equal(values["out"], x * scales)


def test_a_bad_stride_is_refused_at_bind_time():
    values = {
        "x": np.ones(4),
        "out": np.zeros(4),
        "scale": PerEnvScalar(np.ones(4), np.zeros(2, np.int64)),
        "shift": 0.0,
    }
    with pytest.raises(ValueError, match="value 'scale': a PerEnvScalar stride must be a one-element integer array"):
        bind(scaled, values, backend="cpu", num_envs=4)
