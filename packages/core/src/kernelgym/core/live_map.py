"""Numba's live-variable analysis, on bit sets instead of Python sets.

``compute_live_map`` (``numba.core.analysis``) finds the variables alive at the entry of each
block in two fix points: the variables used or defined in any block that reaches a block, then
the uses pushed backward through the blocks that define nothing of them. Both sweep every block
with ``set`` unions; in a kernel whose device functions are all inlined there are thousands of
blocks and of variables, so each sweep unions sets of thousands of names thousands of times, and
the analysis runs again after each of numba's rewriting passes: a fifth of the compile time of
TagContinuous's fused step (profiled: 17 of 75 s in ``def_reach`` alone).

Here each variable is a bit of a Python ``int``: a union is one ``|`` over machine words. The
fix points are the same (each is the least one above its start, whatever the sweep order), and
the result is the same dict of sets (``packages/core/tests/test_live_map.py`` compares both on
random graphs and on kernelgym's own kernels).

`install` puts it in the place of Numba's (``numba.core.analysis`` and the modules that import
it by name) and of numba-cuda's own copy (``numba.cuda.core.analysis``), each as it is imported.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from kernelgym.core.patch_at_import import patch_when_imported

__all__ = ["compute_live_map", "cuda_compute_live_map", "install", "replaced"]

# module -> the analysis module whose compute_live_map it calls (its own, or imported by name)
_NUMBA = {
    "numba.core.analysis": "numba.core.analysis",
    "numba.core.ir_utils": "numba.core.analysis",
    "numba.parfors.parfor": "numba.core.analysis",
}
_NUMBA_CUDA = {
    "numba.cuda.core.analysis": "numba.cuda.core.analysis",
    "numba.cuda.core.ir_utils": "numba.cuda.core.analysis",
}
_REPLACED: dict = {}  # analysis module name -> the compute_live_map `install` replaced there


def compute_live_map(cfg, blocks, var_use_map, var_def_map) -> dict:
    """The variables alive at the entry of each block, as ``numba.core.analysis.compute_live_map``
    finds them (it sweeps the blocks in ``cfg.topo_order()``)."""
    order = list(cfg.topo_order())
    return _live_map(cfg, blocks, var_use_map, var_def_map, order, order[::-1])


def cuda_compute_live_map(cfg, blocks, var_use_map, var_def_map) -> dict:
    """The same as numba-cuda's copy (``numba.cuda.core.analysis``) finds it: it sweeps the blocks
    of ``var_def_map``, then those of ``blocks``."""
    return _live_map(cfg, blocks, var_use_map, var_def_map, list(var_def_map), list(blocks))


def replaced(module_name: str):
    """The ``compute_live_map`` that `install` replaced in ``module_name`` (to compare with)."""
    return _REPLACED.get(module_name)


def install() -> None:
    """Use these in the place of Numba's and numba-cuda's, in each module as it is imported
    (idempotent)."""
    for name in (*_NUMBA, *_NUMBA_CUDA):
        patch_when_imported(name, _patch)


def _patch(module: Any) -> None:
    own = getattr(module, "compute_live_map", None)
    analysis = (_NUMBA | _NUMBA_CUDA)[module.__name__]
    if getattr(own, "__module__", None) != analysis:  # ours already, or someone else's
        return
    _REPLACED.setdefault(analysis, own)
    module.compute_live_map = cuda_compute_live_map if module.__name__ in _NUMBA_CUDA else compute_live_map


def _live_map(cfg, blocks, var_use_map, var_def_map, reach_order, live_order) -> dict:
    bits = _Bits()
    uses = {label: bits.of(names) for label, names in var_use_map.items()}
    defs = {label: bits.of(names) for label, names in var_def_map.items()}
    successors = {label: [out for out, _ in cfg.successors(label)] for label in reach_order}
    predecessors = {label: [inc for inc, _ in cfg.predecessors(label)] for label in live_order}

    # the variables used or defined in any block that reaches each block (Numba's def_reach)
    reach: defaultdict = defaultdict(int)
    changed = True
    while changed:
        changed = False
        for label in reach_order:
            here = reach[label] | defs[label] | uses[label]
            if here != reach[label]:
                reach[label] = here
                changed = True
            for out in successors[label]:
                grown = reach[out] | here
                if grown != reach[out]:
                    reach[out] = grown
                    changed = True

    # the uses pushed backward, to each predecessor that reaches them and does not define them
    live = {label: uses[label] for label in blocks}
    changed = True
    while changed:
        changed = False
        for label in live_order:
            alive = live[label]
            for inc in predecessors[label]:
                grown = live[inc] | (alive & reach[inc] & ~defs[inc])
                if grown != live[inc]:
                    live[inc] = grown
                    changed = True
    return {label: bits.names(value) for label, value in live.items()}


class _Bits:
    """Variable names numbered in the order first seen: a set of names is an ``int``."""

    def __init__(self):
        self._index: dict[str, int] = {}
        self._names: list[str] = []

    def of(self, names) -> int:
        value = 0
        for name in names:
            index = self._index.get(name)
            if index is None:
                index = self._index[name] = len(self._names)
                self._names.append(name)
            value |= 1 << index
        return value

    def names(self, value: int) -> set:
        digits = bin(value)[:1:-1]  # bit i at position i
        found = set()
        position = digits.find("1")
        while position != -1:
            found.add(self._names[position])
            position = digits.find("1", position + 1)
        return found
