"""Numba's SSA reconstruction, rewriting only the blocks that name each variable
(`kernelgym.core.ssa_rewrite`): the same IR as Numba's and numba-cuda's own, and the same code."""

import os
import subprocess
import sys
from pathlib import Path

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


_CODE_OF_A_FUNCTION_INLINING_DEVICE_FUNCTIONS = """
import importlib, re, sys
import numba
import numpy as np
from kernelgym.core import device_function, live_map, ssa_rewrite
sys.path.insert(0, sys.argv[1])
from test_ssa_rewrite import _reassigned

passes, target = sys.argv[2], sys.argv[3]
core = "numba.core" if target == "cpu" else "numba.cuda.core"
if passes == "numbas":
    ssa = importlib.import_module(core + ".ssa")
    ssa._run_ssa = ssa_rewrite.replaced(ssa.__name__)
    for name in ("analysis", "ir_utils"):
        module = importlib.import_module(core + "." + name)
        module.compute_live_map = live_map.replaced(core + ".analysis")

if target == "cpu":
    bounded = device_function(lambda x, limit: x if x < limit else limit)
    step_all = device_function(_reassigned)

    @numba.njit
    def inlining(values, limit):
        total, best = step_all(values, limit)
        again, _ = step_all(values, bounded(total, limit))
        return total + again + best

    values = np.array([3.0, 40.0, 0.5, 9.0, 700.0])
    assert inlining(values, 4.0) == inlining.py_func(values, 4.0)
    text = inlining.inspect_llvm(inlining.signatures[0])
else:
    from numba import cuda

    bounded = cuda.jit(device=True, inline="always")(lambda x, limit: x if x < limit else limit)
    step_all = cuda.jit(device=True, inline="always")(_reassigned)

    def kernel(out, values, limit):
        total, best = step_all(values, limit)
        again, _ = step_all(values, bounded(total, limit))
        out[0] = total + again + best

    text, _ = cuda.compile_ptx(kernel, (numba.float64[:], numba.float64[:], numba.float64), cc=(8, 0))
names = {}  # numba's mangled names count its compiles
print(re.sub(r"_ZN[A-Za-z0-9_$]+", lambda match: names.setdefault(match.group(0), f"n{len(names)}"), text))
"""


def _code(tmp_path, passes, target):
    # each in a fresh process: a second compile in one process numbers inlined blocks and
    # variables on from the first
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _CODE_OF_A_FUNCTION_INLINING_DEVICE_FUNCTIONS,
            str(Path(__file__).parent),
            passes,
            target,
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / passes)},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_function_inlining_device_functions_compiles_to_the_same_llvm_as_with_numbas_passes(tmp_path):
    ours = _code(tmp_path, "ours", "cpu")
    assert "phi" in ours and ours == _code(tmp_path, "numbas", "cpu")


@pytest.mark.gpu_compile
def test_a_kernel_inlining_device_functions_compiles_to_the_same_ptx_as_with_numba_cudas_passes(tmp_path):
    ours = _code(tmp_path, "ours", "cuda")
    assert ".visible .entry" in ours and ours == _code(tmp_path, "numbas", "cuda")
