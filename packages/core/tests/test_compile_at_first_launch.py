"""``bind_launches(compile_at="first_launch")``: a cpu program compiles at its first launch, not at
bind (issue 36: a caller refuses bad per-call values before paying for the build)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core_test_kernels import affine
from kernelgym.core import bind, bind_launches
from kernelgym.core.kernels import KernelTypingError


def _values(scale, shift=0.5, rows=3):
    return {"x": np.arange(2.0 * rows).reshape(rows, 2), "out": np.zeros((rows, 2)), "scale": scale, "shift": shift}


def test_nothing_compiles_until_the_first_launch():
    values = _values(2.0, shift=0.125)  # a shift no other test binds: a launcher of its own
    launch = bind_launches([affine], values, backend="cpu", num_envs=3, compile_at="first_launch")
    (first,) = launch.launches
    assert not first.built and first.func.signatures == []
    launch()
    assert first.built and first.func.signatures
    assert np.array_equal(values["out"], values["x"] * 2.0 + 0.125)


@settings(max_examples=10, deadline=None)
@given(scale=st.floats(-4, 4), shift=st.sampled_from([0.5, -1.0]), rows=st.integers(1, 5))
def test_fuzz_a_first_launch_build_computes_what_a_bind_build_does(scale, shift, rows):
    deferred, now = _values(scale, shift, rows), _values(scale, shift, rows)
    bind_launches([affine], deferred, backend="cpu", num_envs=rows, compile_at="first_launch")()
    bind([affine], now, backend="cpu", num_envs=rows)()
    assert np.array_equal(deferred["out"], now["out"])


def test_a_value_the_bodies_cannot_type_is_raised_at_each_launch_not_at_bind():
    values = _values(1 + 2j)
    launch = bind_launches([affine], values, backend="cpu", num_envs=3, compile_at="first_launch")  # no error yet
    for _ in range(2):
        with pytest.raises(KernelTypingError, match=r"value 'scale': complex128"):
            launch()
    assert not values["out"].any()


def test_an_unknown_compile_at_is_refused_by_name():
    with pytest.raises(ValueError, match=r"compile_at: expected one of \('bind', 'first_launch'\), got 'later'"):
        bind_launches([affine], _values(1.0), backend="cpu", num_envs=3, compile_at="later")
