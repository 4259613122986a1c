"""Numba's inliner copies a callee's IR with one scope for all its blocks (`kernelgym.core.inline_copy`)."""

import copy

import numba
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba.core import inline_closurecall
from numba.core.compiler import run_frontend

import kernelgym.core  # noqa: F401  (installs the shared-scope copy)
from kernelgym.core import device_function, inline_copy


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
    import re

    from numba import cuda
    from numba.cuda.core import inline_closurecall as cuda_inliner

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


class _Plain:
    """An object copy.deepcopy reconstructs from its __dict__ (as most IR nodes)."""


class _Custom:
    def __init__(self, value):
        self.value = value

    def __deepcopy__(self, memo):
        return _Custom(("custom", self.value))


def _shape(value, seen=None):
    """``value``'s structure, with each object that appears twice named by its first visit."""
    seen = {} if seen is None else seen
    if isinstance(value, (int, str, type(None))):
        return value
    if id(value) in seen:
        return ("again", seen[id(value)])
    seen[id(value)] = len(seen)
    name = type(value).__name__
    if isinstance(value, (list, tuple)):
        return (name, [_shape(item, seen) for item in value])
    if isinstance(value, dict):
        return (name, [(_shape(key, seen), _shape(item, seen)) for key, item in value.items()])
    if isinstance(value, _Custom):
        return (name, _shape(value.value, seen))
    return (name, _shape(vars(value), seen))


@st.composite
def object_graphs(draw):
    """Nested plain objects, lists, dicts, tuples and objects with a __deepcopy__ of their own,
    some reached twice, one list holding itself."""
    made: list = []
    atoms = st.one_of(st.integers(-3, 3), st.sampled_from(["a", "b"]), st.none())

    def build(depth):
        if made and draw(st.booleans()) and draw(st.booleans()):
            return draw(st.sampled_from(made))  # shared
        kind = draw(st.sampled_from(["atom", "plain", "list", "dict", "tuple", "custom"] if depth else ["atom"]))
        if kind == "atom":
            return draw(atoms)
        if kind == "custom":
            return _Custom(build(depth - 1))
        if kind == "tuple":
            return tuple(build(depth - 1) for _ in range(draw(st.integers(0, 3))))
        value = {"plain": _Plain, "list": list, "dict": dict}[kind]()
        made.append(value)
        for index in range(draw(st.integers(0, 3))):
            item = build(depth - 1)
            if kind == "plain":
                setattr(value, f"field{index}", item)
            elif kind == "list":
                value.append(item)
            else:
                value[f"key{index}"] = item
        return value

    root = [build(3) for _ in range(draw(st.integers(1, 4)))]
    root.append(root)
    return root


@settings(max_examples=200, deadline=None)
@given(object_graphs())
def test_the_short_path_copies_as_copy_deepcopy_does(graph):
    ours_memo: dict = {}
    theirs_memo: dict = {}
    ours = inline_copy.deepcopy_objects(graph, ours_memo)
    theirs = copy.deepcopy(graph, theirs_memo)
    assert _shape(ours) == _shape(theirs) == _shape(copy.deepcopy(graph))
    # the same objects copied (memo keys), each kept alive for as long as the memo lives
    assert set(ours_memo) - {id(ours_memo)} == set(theirs_memo) - {id(theirs_memo)}
    for original_id in set(ours_memo) - {id(ours_memo)}:
        assert (ours_memo[original_id] is graph) == (theirs_memo[original_id] is graph)


def test_a_numba_block_copies_as_copy_deepcopy_copies_it():
    func_ir = run_frontend(_branchy)
    for block in func_ir.blocks.values():
        ours = inline_copy.deepcopy_objects(block, {})
        theirs = copy.deepcopy(block)
        assert [str(stmt) for stmt in ours.body] == [str(stmt) for stmt in theirs.body]
        assert [stmt.loc for stmt in ours.body] == [stmt.loc for stmt in block.body]
        assert all(copied is not stmt for copied, stmt in zip(ours.body, block.body))
        assert ours.scope == block.scope and ours.scope is not block.scope
