"""Numba's passes that kernelgym replaces with faster ones of the same result
(`kernelgym.core.inline_copy`, `live_map`, `ssa_rewrite`): a function that
inlines device functions, with branches, loops and reassigned variables, compiles to the same
LLVM IR (cpu) and PTX (cuda) with them as with Numba's and numba-cuda's own."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

_CODE_OF_A_FUNCTION_INLINING_DEVICE_FUNCTIONS = """
import copy, importlib, re, sys
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
    importlib.import_module(core + ".inline_closurecall").copy = copy

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


def test_a_function_inlining_device_functions_compiles_to_the_same_llvm_with_numbas_own_passes(tmp_path):
    ours = _code(tmp_path, "ours", "cpu")
    assert "phi" in ours and ours == _code(tmp_path, "numbas", "cpu")


@pytest.mark.gpu_compile
def test_a_kernel_inlining_device_functions_compiles_to_the_same_ptx_with_numba_cudas_own_passes(tmp_path):
    ours = _code(tmp_path, "ours", "cuda")
    assert ".visible .entry" in ours and ours == _code(tmp_path, "numbas", "cuda")
