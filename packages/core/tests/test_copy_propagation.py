"""The serial launchers' compiler (`kernelgym.core.copy_propagation`): numba's serial pipeline
plus the copy propagation of its parallel one, with the same bits."""

import numba
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kernelgym.core.copy_propagation import CopyPropagatingCompiler

VALUES = st.floats(allow_nan=True, allow_infinity=True, width=64)


@numba.njit(inline="always", error_model="numpy")
def _scale_or_negate(i, out, x, scale):
    if x[i] > 0.5:
        out[i] = x[i] * scale
    else:
        out[i] = -x[i] / scale


@numba.njit(inline="always", error_model="numpy")
def _accumulate(i, out, x, y):
    for _ in range(2):
        out[i] += x[i] * y[i] - y[i]


def _program(num_envs, mask, out, x, y, scale):
    # bodies inlined into a loop over envs, as a generated launcher's: each call copies arrays
    for env in range(num_envs):
        if mask[env]:
            _scale_or_negate(env, out, x, scale)
            _accumulate(env, out, x, y)
            _accumulate(env, out, y, x)


_plain = numba.njit(error_model="numpy")(_program)
_propagated = numba.njit(error_model="numpy", pipeline_class=CopyPropagatingCompiler)(_program)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_copy_propagation_keeps_every_bit(data):
    n = data.draw(st.integers(0, 30))
    x, y = (data.draw(hnp.arrays(np.float64, n, elements=VALUES)) for _ in range(2))
    mask = data.draw(hnp.arrays(np.bool_, n))
    scale = data.draw(VALUES)
    plain_out, propagated_out = np.zeros(n), np.zeros(n)
    _plain(n, mask, plain_out, x, y, scale)
    _propagated(n, mask, propagated_out, x, y, scale)
    assert plain_out.tobytes() == propagated_out.tobytes()  # NaN payloads and signed zeros too
