"""KERNELGYM_PARAMS: bound scalars compiled in as constants (default) or passed as launcher
arguments, where one compile serves every value. Both give the same bits."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from core_test_kernels import affine
from kernelgym.core import bind, codegen, to_numpy
from kernelgym.core.arrays import to_backend

FINITE = st.floats(-1e6, 1e6, allow_nan=False)
SCALES = st.one_of(FINITE, FINITE.map(np.float32), st.integers(-(2**31), 2**31))
MATRICES = hnp.arrays(np.float64, st.tuples(st.integers(1, 30), st.integers(1, 3)), elements=FINITE)


def _scaled(backend, x, scale, shift):
    values = {"x": to_backend(x, backend), "out": to_backend(np.zeros_like(x), backend), "scale": scale, "shift": shift}
    launch = bind(affine, values, backend=backend, num_envs=x.shape[0])
    launch()
    return to_numpy(values["out"]).copy(), launch


@pytest.mark.parametrize("raw", ["", "constants", " Arguments ", "ARGUMENTS"])
def test_the_mode_is_read_from_the_variable(monkeypatch, raw):
    monkeypatch.setenv("KERNELGYM_PARAMS", raw)
    assert codegen.params_mode() == (raw.strip().lower() or "constants")


def test_an_unknown_mode_is_refused_with_the_choices(monkeypatch):
    monkeypatch.setenv("KERNELGYM_PARAMS", "frozen")
    expected = r"KERNELGYM_PARAMS: expected one of \('constants', 'arguments'\), got 'frozen'"
    with pytest.raises(ValueError, match=expected):
        codegen.params_mode()
    x = np.ones((2, 2))
    with pytest.raises(ValueError, match="KERNELGYM_PARAMS"):  # at bind, before any launch
        _scaled("cpu", x, 1.0, 0.0)


@pytest.mark.parametrize("variable", ["", "constants", "arguments"])
@pytest.mark.parametrize("override", ["constants", "arguments"])
def test_an_override_wins_over_the_variable_inside_its_block_only(monkeypatch, variable, override):
    monkeypatch.setenv("KERNELGYM_PARAMS", variable)
    with codegen.params_mode_override(override):
        assert codegen.params_mode() == override
        assert codegen.params_mode("constants") == "constants"  # an explicit value is still taken as given
    assert codegen.params_mode() == (variable or "constants")


def test_an_override_to_an_unknown_mode_is_refused_before_the_block(monkeypatch):
    monkeypatch.delenv("KERNELGYM_PARAMS", raising=False)
    with pytest.raises(ValueError, match=r"params mode: expected one of \('constants', 'arguments'\), got 'frozen'"):
        with codegen.params_mode_override("frozen"):
            pytest.fail("the block ran")
    assert codegen.params_mode() == "constants"


def test_one_compile_serves_every_value_under_an_arguments_override(monkeypatch):
    monkeypatch.setenv("KERNELGYM_CPU_THREADS", "one")
    monkeypatch.setenv("KERNELGYM_PARAMS", "constants")
    x = np.arange(6.0).reshape(3, 2)
    with codegen.params_mode_override("arguments"):
        launchers = {_launcher(_scaled("cpu", x, scale, 0.5)[1]) for scale in (1.25, -3.0, 7.5)}
    assert len(launchers) == 1


def test_scalar_types_stay_constants_and_oversized_ints_too_in_arguments_mode():
    assert codegen.is_constant(np.float32, "arguments")
    assert codegen.is_constant(2**70, "arguments")  # no machine type holds it as an argument
    assert not any(codegen.is_constant(value, "arguments") for value in (1.5, 3, True, np.float32(2), np.int8(1)))


@settings(max_examples=25, deadline=None)
@given(MATRICES, SCALES, FINITE)
def test_arguments_give_the_bits_of_constants(x, scale, shift):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KERNELGYM_CPU_THREADS", "one")
        patch.setenv("KERNELGYM_PARAMS", "constants")
        frozen, _ = _scaled("cpu", x, scale, shift)
        patch.setenv("KERNELGYM_PARAMS", "arguments")
        passed, _ = _scaled("cpu", x, scale, shift)
    assert frozen.tobytes() == passed.tobytes()


def _launcher(launch):
    """The numba dispatcher a one-thread cpu launch calls."""
    (call,) = launch._calls
    return call.func


def test_one_compile_serves_every_value_as_arguments_and_each_value_compiles_as_constants(monkeypatch):
    monkeypatch.setenv("KERNELGYM_CPU_THREADS", "one")
    x = np.arange(6.0).reshape(3, 2)
    monkeypatch.setenv("KERNELGYM_PARAMS", "arguments")
    first = _launcher(_scaled("cpu", x, 1.25, 0.5)[1])
    compiled = len(first.signatures)  # other tests here may have typed it for other scalar types
    assert {_launcher(_scaled("cpu", x, scale, 0.5)[1]) for scale in (-3.0, 7.5)} == {first}
    assert len(first.signatures) == compiled
    monkeypatch.setenv("KERNELGYM_PARAMS", "constants")
    frozen = {_launcher(_scaled("cpu", x, scale, 0.5)[1]) for scale in (1.25, -3.0, 7.5)}
    assert len(frozen) == 3


@pytest.mark.sim
@settings(max_examples=10, deadline=None)
@given(MATRICES, FINITE, FINITE)
def test_arguments_give_the_bits_of_constants_in_the_simulator(x, scale, shift):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KERNELGYM_PARAMS", "constants")
        frozen, _ = _scaled("sim", x, scale, shift)
        patch.setenv("KERNELGYM_PARAMS", "arguments")
        passed, _ = _scaled("sim", x, scale, shift)
    assert frozen.tobytes() == passed.tobytes()
