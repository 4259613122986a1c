"""Numba's ``inline="always"`` copies a callee's IR with one scope for all its blocks.

Every device function is an ``njit(inline="always")`` dispatcher (`kernelgym.core.device_functions`),
and Numba inlines one at each call site by copying the callee's IR (``InlineWorker.inline_ir``
in ``numba.core.inline_closurecall``). Numba 0.68 deep-copies each block with a memo of its
own, and a block's variables reach the function's whole scope (every variable of the
function), so one copy costs blocks x variables: for the Tag envs' observations (helpers
inlined into helpers) nearly 40 % of a build's compile time (measured: 24.0 s of CPU for a
TagContinuous cpu build, 14.8 s with this module).

`install` makes those copies share one memo per copied IR, so the blocks of the copy share
one copy of the scope, as the blocks of the original share the original scope (a whole
``FunctionIR.blocks`` dict deep-copied at once does the same). The IR and the compiled code
are otherwise the same. numba-cuda inlines with its own copy of that module
(``numba.cuda.core.inline_closurecall``, with its own ``ir.Block``), patched the same way:
there the copies were 59 % of the time ``kernelgym gpu-compile`` took to build
TagContinuous's kernels (profiled: 165 of 279 s).

The copies then still took a seventh of a fused Tag step's compile: `deepcopy_objects` copies
the blocks as ``copy.deepcopy`` does, with a shorter path for the plain objects, lists and
dicts they are made of (the same copies and memo: ``test_core_inline_copy.py``).
"""

from __future__ import annotations

import copy
import importlib
from typing import Any

from kernelgym.core.patch_at_import import patch_when_imported

__all__ = ["deepcopy_objects", "install"]


class _SharedScopeCopy:
    """The ``copy`` module as ``numba.core.inline_closurecall`` sees it: ``deepcopy`` of a block
    without a memo reuses one memo for consecutive blocks of one scope (the blocks of one IR
    copied one after another), a new memo at a block of another scope or at a block that
    memo already copied (the same IR copied again)."""

    def __init__(self, block_type: Any):
        self._block_type: Any = block_type
        self._scope: Any = None
        self._memo: dict = {}

    def deepcopy(self, value: Any, memo: dict | None = None) -> Any:
        if memo is None and isinstance(value, self._block_type):
            if value.scope is not self._scope or id(value) in self._memo:
                self._scope, self._memo = value.scope, {}
            return deepcopy_objects(value, self._memo)
        return copy.deepcopy(value, memo)

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)


def deepcopy_objects(value: Any, memo: dict) -> Any:
    """``copy.deepcopy(value, memo)``, with a shorter path for lists, dicts and objects of plain
    classes (no ``__deepcopy__``, ``__reduce__``, ``__getstate__`` or slots of their own): a new
    object of the class with its ``__dict__`` copied, as ``copy.deepcopy`` reconstructs one, and
    the same memo entries. A numba IR block is nearly all such objects (statements, expressions,
    locations): its copies took 4 times longer through ``copy.deepcopy``'s general protocol."""
    kind = type(value)
    if kind in _ATOMIC:
        return value
    found = memo.get(id(value), _MISSING)
    if found is not _MISSING:
        return found
    if kind is list:
        copied: Any = []
        _remember(value, copied, memo)
        copied.extend(deepcopy_objects(item, memo) for item in value)
        return copied
    if kind is dict:
        copied = {}
        _remember(value, copied, memo)
        for key, item in value.items():
            copied[deepcopy_objects(key, memo)] = deepcopy_objects(item, memo)
        return copied
    if kind is tuple:
        items = [deepcopy_objects(item, memo) for item in value]
        found = memo.get(id(value), _MISSING)  # the tuple reached again through its items
        if found is not _MISSING:
            return found
        if all(copied is item for copied, item in zip(items, value)):
            return value  # as copy.deepcopy returns a tuple of atoms: the same, no memo entry
        copied = tuple(items)
        _remember(value, copied, memo)
        return copied
    plain = _PLAIN.get(kind)
    if plain is None:
        plain = _PLAIN[kind] = _is_plain(kind)
    if not plain:
        return copy.deepcopy(value, memo)
    copied = object.__new__(kind)
    _remember(value, copied, memo)
    state = value.__dict__
    if not state:  # no state to copy (object.__getstate__ gives None)
        return copied
    copied_state: dict = {}
    memo[id(state)] = copied_state  # as copy.deepcopy copies the state dict
    for key, item in state.items():
        copied_state[key] = deepcopy_objects(item, memo)
    copied.__dict__.update(copied_state)
    return copied


_ATOMIC = frozenset({type(None), bool, int, float, complex, str, bytes, type, range, type(Ellipsis)})
_MISSING = object()
_PLAIN: dict[type, bool] = {}


def _is_plain(kind: type) -> bool:
    """Whether ``copy.deepcopy`` copies an object of ``kind`` as a new object with a deep copy of
    its ``__dict__`` and nothing else."""
    return (
        kind.__new__ is object.__new__
        and getattr(kind, "__deepcopy__", None) is None
        and kind.__reduce_ex__ is object.__reduce_ex__
        and kind.__reduce__ is object.__reduce__
        and getattr(kind, "__getstate__", None) is getattr(object, "__getstate__", None)
        and "__setstate__" not in dir(kind)
        and all("__slots__" not in vars(base) for base in kind.__mro__[:-1])
        and kind not in vars(copy)["_deepcopy_dispatch"]  # the types copy.deepcopy copies its own way
    )


def _remember(original: Any, copied: Any, memo: dict) -> None:
    """``copy.deepcopy``'s memo entry, and its list that keeps the originals alive (their ids
    must not be reused while the memo lives)."""
    memo[id(original)] = copied
    memo.setdefault(id(memo), []).append(original)


# each inliner module, and the module of the IR (and ``Block``) it copies
_INLINERS = {
    "numba.core.inline_closurecall": "numba.core.ir",
    "numba.cuda.core.inline_closurecall": "numba.cuda.core.ir",  # numba-cuda's own
}


def install() -> None:
    """Make Numba's and numba-cuda's inliners copy a callee's blocks with one shared scope
    (idempotent).

    Patches each inliner now where it is imported, else as it is first imported
    (`kernelgym.core.patch_at_import`): Numba's pulls in its lowering modules (about 0.5 s),
    which a process whose launchers all come from the disk cache never needs. Leaves an
    inliner alone where it does not use the ``copy`` module as expected.
    """
    for name in _INLINERS:
        patch_when_imported(name, _patch)


def _patch(inliner: Any) -> None:
    if getattr(inliner, "copy", None) is copy:
        ir = importlib.import_module(_INLINERS[inliner.__name__])
        inliner.copy = _SharedScopeCopy(ir.Block)
