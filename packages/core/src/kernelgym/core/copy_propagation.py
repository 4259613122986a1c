"""The serial cpu launchers' compiler: numba's own pipeline, plus the copy propagation its
parallel pipeline runs.

Every body a launcher calls is inlined into it (``inline="always"``), and each inlined call
binds the launcher's arrays to the body's parameter names anew: copies of array variables
inside the loop over envs, whose references numba counts (an ``NRT_incref``/``NRT_decref``
pair on the array's meminfo per copy). Numba's parallel pipeline removes such copies before
lowering (its ``ParforFusionPass`` runs `numba.core.ir_utils.simplify`: copy propagation,
dead code removal, CFG simplification), its serial pipeline does not. So the serial twin of
CartPole's step ran 4-5x slower per env than the thread team's build on one thread (52
reference-count calls in its LLVM IR against 34). `CopyPropagatingCompiler` runs the same
simplification in the serial pipeline, after numba's rewrites and before lowering: the same
statements, so the same bits (``packages/core/tests/test_copy_propagation.py``), and the
serial build compiles no slower (less IR to lower).

Its data flow is `kernelgym.core.copy_data_flow.copy_propagate` (numba's, without a deep copy
per sweep).
"""

from __future__ import annotations

from numba.core import ir_utils
from numba.core.compiler import CompilerBase, DefaultPassBuilder
from numba.core.compiler_machinery import FunctionPass, register_pass
from numba.core.typed_passes import NopythonRewrites

from kernelgym.core.copy_data_flow import copy_propagate


@register_pass(mutates_CFG=True, analysis_only=False)
class PropagateCopies(FunctionPass):
    """Numba's copy propagation, dead code removal and CFG simplification, on typed IR."""

    _name = "kernelgym_propagate_copies"

    def __init__(self):
        FunctionPass.__init__(self)

    def run_pass(self, state) -> bool:
        simplify(state.func_ir, state.typemap, state.calltypes)
        return True


def simplify(func_ir, typemap, calltypes) -> None:
    """`numba.core.ir_utils.simplify` with kernelgym's `copy_propagate` as its data flow."""
    entering, _ = copy_propagate(func_ir.blocks, typemap)
    names = ir_utils.get_name_var_table(func_ir.blocks)
    saved = ir_utils.apply_copy_propagate(func_ir.blocks, entering, names, typemap, calltypes)
    ir_utils.restore_copy_var_names(func_ir.blocks, saved, typemap)
    ir_utils.remove_dead(func_ir.blocks, func_ir.arg_names, func_ir, typemap)
    func_ir.blocks = ir_utils.simplify_CFG(func_ir.blocks)
    func_ir._definitions = ir_utils.build_definitions(func_ir.blocks)


class CopyPropagatingCompiler(CompilerBase):
    """Numba's nopython pipeline with `PropagateCopies` after its rewrites
    (``njit(pipeline_class=CopyPropagatingCompiler)``)."""

    def define_pipelines(self):
        pipeline = DefaultPassBuilder.define_nopython_pipeline(self.state)
        pipeline.add_pass_after(PropagateCopies, NopythonRewrites)
        pipeline.finalize()
        return [pipeline]
