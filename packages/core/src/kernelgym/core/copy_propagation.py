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

The data flow is numba's (`numba.core.ir_utils.copy_propagate`), solved without its
``copy.deepcopy`` of every block's copy set on every sweep: the sets hold tuples of names, so a
flag that any block's set changed says what comparing deep copies says. With TagContinuous's
step that deep copy was a third of the serial build's compile time.
"""

from __future__ import annotations

from numba.core import ir_utils
from numba.core.compiler import CompilerBase, DefaultPassBuilder
from numba.core.compiler_machinery import FunctionPass, register_pass
from numba.core.typed_passes import NopythonRewrites


@register_pass(mutates_CFG=True, analysis_only=False)
class PropagateCopies(FunctionPass):
    """Numba's copy propagation, dead code removal and CFG simplification, on typed IR."""

    _name = "kernelgym_propagate_copies"

    def __init__(self):
        FunctionPass.__init__(self)

    def run_pass(self, state) -> bool:
        simplify(state.func_ir, state.typemap, state.calltypes)
        return True


def copies_entering_blocks(blocks, typemap) -> dict:
    """The copies (``(lhs, rhs)`` names) valid on entry to each block.

    Numba's fixed point (``in = intersection of the predecessors' out``, ``out = gen | (in -
    kill)``), iterated until no block's ``out`` changes, as `ir_utils.copy_propagate` does.
    """
    cfg = ir_utils.compute_cfg_from_blocks(blocks)
    entry = cfg.entry_point()
    gen, _all, kill, entering, leaving = ir_utils.init_copy_propagate_data(blocks, entry, typemap)
    predecessors = {label: [p for p, _ in cfg.predecessors(label)] for label in blocks}
    changed = True
    while changed:
        changed = False
        for label in blocks:
            if label == entry:
                continue
            first, *others = predecessors[label]
            valid = leaving[first].copy()
            for other in others:
                valid &= leaving[other]
            entering[label] = valid
            out = gen[label] | (valid - kill[label])
            if out != leaving[label]:
                leaving[label] = out
                changed = True
    return entering


def simplify(func_ir, typemap, calltypes) -> None:
    """`numba.core.ir_utils.simplify` with `copies_entering_blocks` as its data flow."""
    entering = copies_entering_blocks(func_ir.blocks, typemap)
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
