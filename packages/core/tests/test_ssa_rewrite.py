"""Numba's SSA reconstruction, rewriting only the blocks that name each variable
(`kernelgym.core.ssa_rewrite`): the same IR as Numba's and numba-cuda's own (the same code:
test_replaced_passes.py)."""

import numba
import pytest
from numba.core import ssa
from numba.core.compiler import run_frontend

import kernelgym.core.device_functions  # noqa: F401  (installs the rewrite)
from kernelgym.core import ssa_rewrite


def _reassigned(values, limit):
    total = 0.0
    best = -1
    for i in range(values.shape[0]):
        x = values[i]
        while x > limit:
            x = x / 2.0
            if x < 1.0:
                best = i
                break
        else:
            x = -x
        if x > total:
            total = x
        elif i % 3 == 0:
            total -= x
            best = i
    if best < 0:
        total = 0.0
    return total, best


def _straight(a, b):
    c = a + b
    return c * 2


def _unset_on_one_path(flag, n):
    if flag:
        found = n
    for i in range(n):
        if i == 2:
            found = i
    return found


def _dump(blocks):
    """Every block's statements as text: variable names, phi incoming values and blocks included."""
    return [(label, [str(stmt) for stmt in block.body]) for label, block in blocks.items()]


@pytest.mark.parametrize("function", [_reassigned, _straight, _unset_on_one_path])
def test_the_rewrite_gives_numbas_ir_name_for_name(function):
    numbas = ssa_rewrite.replaced("numba.core.ssa")
    assert numbas is not None and ssa._run_ssa is not numbas
    their_input, our_input = run_frontend(function).blocks, run_frontend(function).blocks
    theirs, ours = numbas(their_input), ssa._run_ssa(our_input)
    assert _dump(ours) == _dump(theirs)
    # Numba's rewrite changes some expressions of its input in place (shallow copies): so does ours
    assert _dump(our_input) == _dump(their_input)
    # new blocks where Numba makes new ones (none without a variable to rewrite)
    assert [ours[label] is block for label, block in our_input.items()] == [
        theirs[label] is block for label, block in their_input.items()
    ]


def test_a_reassigned_variable_meets_at_phi_nodes():
    phis = [
        stmt
        for block in ssa._run_ssa(run_frontend(_reassigned).blocks).values()
        for stmt in block.find_insts(numba.core.ir.Assign)
        if isinstance(stmt.value, numba.core.ir.Expr) and stmt.value.op == "phi"
    ]
    assert {stmt.target.name.split(".")[0] for stmt in phis} >= {"x", "total", "best"}


@pytest.mark.parametrize("function", [_reassigned, _unset_on_one_path])
def test_numba_cudas_copy_gets_numba_cudas_ir(function):
    cuda_compiler = pytest.importorskip("numba.cuda.compiler")
    from numba.cuda.core import ssa as cuda_ssa

    theirs_run = ssa_rewrite.replaced("numba.cuda.core.ssa")
    assert theirs_run is not None and cuda_ssa._run_ssa is not theirs_run
    theirs = theirs_run(cuda_compiler.run_frontend(function).blocks)
    ours = cuda_ssa._run_ssa(cuda_compiler.run_frontend(function).blocks)
    assert _dump(ours) == _dump(theirs)
