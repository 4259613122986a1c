"""The serial launchers' compiler (`kernelgym.core.copy_propagation`): numba's serial pipeline
plus the copy propagation of its parallel one, with the same bits."""

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from numba.core import ir_utils
from numba.core.compiler import CompilerBase, DefaultPassBuilder
from numba.core.compiler_machinery import FunctionPass, register_pass
from numba.core.typed_passes import NopythonRewrites

import kernelgym.core.device_functions  # noqa: F401  (installs kernelgym's data flow in numba)
from kernelgym.core.copy_data_flow import copy_propagate, numbas_copy_propagate
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


def _branchy(num_envs, mask, out, x, y, scale):
    # loops, nested branches and copies that die in some paths: a data flow with many sweeps
    for env in range(num_envs):
        a = x
        b = y
        if mask[env]:
            a = y
            for _ in range(3):
                if scale > 1.0:
                    b = a
                else:
                    a, b = b, a
        _accumulate(env, out, a, b)


@register_pass(mutates_CFG=False, analysis_only=True)
class _CompareDataFlows(FunctionPass):
    """Records kernelgym's and numba's copy data flow on the typed IR, changing nothing."""

    _name = "kernelgym_test_compare_copy_data_flows"
    found: list = []

    def __init__(self):
        FunctionPass.__init__(self)

    def run_pass(self, state) -> bool:
        numbas = numbas_copy_propagate()(state.func_ir.blocks, state.typemap)
        ours = copy_propagate(state.func_ir.blocks, state.typemap)
        self.found.append((numbas, ours))
        return False


class _ComparingCompiler(CompilerBase):
    def define_pipelines(self):
        pipeline = DefaultPassBuilder.define_nopython_pipeline(self.state)
        pipeline.add_pass_after(_CompareDataFlows, NopythonRewrites)
        pipeline.finalize()
        return [pipeline]


@pytest.mark.parametrize("program", [_program, _branchy])
def test_the_data_flow_finds_numbas_copies_for_every_block(program):
    _CompareDataFlows.found.clear()
    compiled = numba.njit(error_model="numpy", pipeline_class=_ComparingCompiler)(program)
    compiled(2, np.ones(2, np.bool_), np.zeros(2), np.ones(2), np.ones(2), 2.0)
    ((numbas, ours),) = _CompareDataFlows.found
    entering, leaving = ours
    assert len(entering) > 3 and any(entering.values())  # a data flow with blocks and copies to find
    assert ours == numbas


def test_numba_runs_kernelgyms_data_flow_where_it_ran_its_own():
    import numba.parfors.parfor

    assert numbas_copy_propagate() is not copy_propagate
    assert numbas_copy_propagate().__module__ == "numba.core.ir_utils"
    assert ir_utils.copy_propagate is copy_propagate
    assert numba.parfors.parfor.copy_propagate is copy_propagate


def test_the_branchy_program_keeps_its_bits():
    args = (5, np.array([1, 0, 1, 1, 0], np.bool_), None, np.arange(5.0), np.arange(5.0)[::-1].copy())
    outs = []
    for compiled in (
        numba.njit(error_model="numpy")(_branchy),
        numba.njit(error_model="numpy", pipeline_class=CopyPropagatingCompiler)(_branchy),
    ):
        for scale in (0.5, 2.0):
            out = np.zeros(5)
            compiled(*args[:2], out, *args[3:], scale)
            outs.append(out.tobytes())
    assert outs[:2] == outs[2:]
