"""Numba's copy propagation data flow, solved without a deep copy of every block's copies per sweep.

`numba.core.ir_utils.copy_propagate` finds the copies (``a = b`` of variables) valid on entry
to each block: in = intersection of the predecessors' out, out = gen | (in - kill), swept
until nothing changes. It tells that nothing changed by comparing ``copy.deepcopy`` snapshots
of every block's set after each sweep. The sets hold tuples of names, so a flag that a sweep
changed some block's set says the same; the deep copies were a third of the compile time of
TagContinuous's serial step (`kernelgym.core.copy_propagation` runs this pass) and a fifth of
TagGridWorld's thread-team build (numba's parallel pipeline runs it up to five times).

`install` puts `copy_propagate` in Numba's place (``numba.core.ir_utils``, which its
``simplify`` calls, and ``numba.parfors.parfor``, which imports it by name), each as it is
imported: same arguments, same results (``packages/core/tests/test_copy_propagation.py``).
"""

from __future__ import annotations

from typing import Any

from kernelgym.core.patch_at_import import patch_when_imported

__all__ = ["copy_propagate", "install", "numbas_copy_propagate"]

_PATCHED = ("numba.core.ir_utils", "numba.parfors.parfor")
_NUMBAS: dict = {}  # Numba's own copy_propagate, kept when it is replaced


def copy_propagate(blocks, typemap) -> tuple[dict, dict]:
    """The copies (``(lhs, rhs)`` names) valid on entry to and on exit from each block, as
    `numba.core.ir_utils.copy_propagate` returns them."""
    from numba.core import ir_utils

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
    return entering, leaving


def numbas_copy_propagate():
    """Numba's own ``copy_propagate`` (the one `install` replaced; to compare with)."""
    from numba.core import ir_utils

    return _NUMBAS.get("numba.core.ir_utils", ir_utils.copy_propagate)


def install() -> None:
    """Use `copy_propagate` in Numba's place, in each module as it is imported (idempotent)."""
    for name in _PATCHED:
        patch_when_imported(name, _patch)


def _patch(module: Any) -> None:
    own = getattr(module, "copy_propagate", None)
    if getattr(own, "__module__", None) == "numba.core.ir_utils":  # Numba's, not ours or another's
        _NUMBAS[module.__name__] = own
        module.copy_propagate = copy_propagate
