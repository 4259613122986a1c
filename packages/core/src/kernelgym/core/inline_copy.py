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
"""

from __future__ import annotations

import copy
import importlib
from typing import Any

from kernelgym.core.patch_at_import import patch_when_imported

__all__ = ["install"]


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
            return copy.deepcopy(value, self._memo)
        return copy.deepcopy(value, memo)

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)


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
