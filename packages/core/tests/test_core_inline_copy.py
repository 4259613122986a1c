"""Numba's inliner copies a callee's IR with one scope for all its blocks (`kernelgym.core.inline_copy`)."""

import numba
import pytest
from numba.core import inline_closurecall
from numba.core.compiler import run_frontend

import kernelgym.core  # noqa: F401  (installs the shared-scope copy)
from kernelgym.core import device_function


def _branchy(n):
    total = 0
    for i in range(n):
        if i % 3 == 0:
            total += i
        elif i % 3 == 1:
            total -= 1
    return total


def _copy_blocks(func_ir):
    # what InlineWorker.inline_ir's copy_ir does: one deepcopy per block
    return {label: inline_closurecall.copy.deepcopy(block) for label, block in func_ir.blocks.items()}


def test_a_copied_ir_shares_one_copy_of_the_scope():
    func_ir = run_frontend(_branchy)
    assert len(func_ir.blocks) > 3
    first = _copy_blocks(func_ir)
    scopes = {id(block.scope) for block in first.values()}
    assert len(scopes) == 1  # Numba's own copy made one scope per block
    original = next(iter(func_ir.blocks.values())).scope
    assert next(iter(first.values())).scope is not original
    assert next(iter(first.values())).scope == original  # the same variables
    # copying the same IR again gives a new copy, and so does copying the copy
    second = _copy_blocks(func_ir)
    assert next(iter(second.values())).scope is not next(iter(first.values())).scope
    for label, block in second.items():
        assert block is not first[label] and block.body is not first[label].body
    third = {label: inline_closurecall.copy.deepcopy(block) for label, block in first.items()}
    assert next(iter(third.values())).scope is not next(iter(first.values())).scope


def test_other_copies_are_plain_deepcopies():
    value = {"a": [1, 2]}
    memo: dict = {}
    copied = inline_closurecall.copy.deepcopy(value, memo)
    assert copied == value and copied["a"] is not value["a"] and id(value) in memo
    assert inline_closurecall.copy.copy is __import__("copy").copy


_helper = device_function(_branchy)


@numba.njit
def _twice(n):
    return _helper(n) + 2 * _helper(n + 1)


@pytest.mark.parametrize("n", [0, 1, 7, 50])
def test_a_kernel_inlining_a_device_function_twice_computes_as_python(n):
    assert _twice(n) == _branchy(n) + 2 * _branchy(n + 1)


@pytest.mark.gpu_compile
def test_numba_cudas_inliner_shares_the_scope_too_and_builds_the_same_ptx(monkeypatch):
    import copy
    import re

    from numba import cuda
    from numba.cuda.core import inline_closurecall as cuda_inliner

    from kernelgym.core import inline_copy

    assert isinstance(cuda_inliner.copy, inline_copy._SharedScopeCopy)

    def ptx():
        # helpers inlined into helpers, each inlined twice: copies of copied IR
        helper = cuda.jit(device=True, inline="always")(_branchy)

        @cuda.jit(device=True, inline="always")
        def twice(n):
            return helper(n) - helper(n // 2)

        def kernel(out, n):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = twice(n + i) + 2 * twice(n - i)

        text, _ = cuda.compile_ptx(kernel, (numba.int64[:], numba.int64), cc=(8, 0))
        names: dict = {}  # numba's mangled names count its compiles
        return re.sub(r"_ZN[A-Za-z0-9_$]+", lambda match: names.setdefault(match.group(0), f"s{len(names)}"), text)

    shared = ptx()
    monkeypatch.setattr(cuda_inliner, "copy", copy)
    assert ptx() == shared
