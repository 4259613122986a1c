"""Numba's SSA reconstruction, rewriting only the blocks that name each variable.

``numba.core.ssa._run_ssa`` makes a function's IR single-assignment one variable at a time: for
each variable assigned more than once it renames the assignments, then points each use at the
definition that reaches it (with phi nodes where definitions meet). Each of those two steps
rebuilds every block of the function, statement by statement, though only the blocks that name
the variable can change. With every device function inlined there are hundreds of such
variables (each inlined loop counter, each reassigned local) and thousands of blocks: the SSA
pass was a sixth of the compile time of TagContinuous's fused step (profiled: 29 of 169 s).

`run_ssa_for` builds a ``_run_ssa`` that rebuilds only the blocks naming the variable (an
assignment to it or a use of it) and keeps the others as they are: in those Numba's handlers
return every statement unchanged, so the IR is the same, name for name and statement for
statement (``packages/core/tests/test_ssa_rewrite.py`` compares both on kernelgym's kernels).
It runs Numba's own handlers, so phi placement and the choice of reaching definitions are
Numba's.

`install` puts it in the place of Numba's (``numba.core.ssa``) and of numba-cuda's own copy
(``numba.cuda.core.ssa``), each as it is imported.
"""

from __future__ import annotations

from collections import defaultdict
from types import ModuleType
from typing import Any

from kernelgym.core.patch_at_import import patch_when_imported

__all__ = ["install", "replaced", "run_ssa_for"]

_MODULES = ("numba.core.ssa", "numba.cuda.core.ssa")
_REPLACED: dict = {}  # module name -> the _run_ssa `install` replaced there


def run_ssa_for(ssa: ModuleType):
    """A ``_run_ssa(blocks)`` with the same result as ``ssa._run_ssa``, built on that module's
    own handlers (``numba.core.ssa`` or numba-cuda's ``numba.cuda.core.ssa``)."""

    def _run_ssa(blocks: dict) -> dict:
        if not blocks:
            return {}
        cfg = ssa.compute_cfg_from_blocks(blocks)
        df_plus = ssa._iterated_domfronts(cfg)
        violators = ssa._find_defs_violators(blocks, cfg)
        cache_list_vars = ssa._CacheListVars()
        if violators:
            naming = _blocks_naming(blocks, violators, cache_list_vars)
            # new blocks, as Numba's rewrite makes, once: then only those naming a variable change
            blocks = {label: _copy_block(ssa.ir, block) for label, block in blocks.items()}
        for varname in violators:
            labels = naming[varname]
            defmap = _fresh_vars(blocks, labels, varname)
            _fix_ssa_vars(blocks, labels, varname, defmap, cfg, df_plus, cache_list_vars)
        if ssa.compute_cfg_from_blocks(blocks) != cfg:
            raise ssa.errors.CompilerError("CFG mutated in SSA pass")
        return blocks

    def _fresh_vars(blocks: dict, labels: list, varname: str) -> defaultdict:
        states = ssa._make_states(blocks)
        states["varname"] = varname
        states["defmap"] = defmap = defaultdict[Any, list](list)
        _rewrite(blocks, labels, states, ssa._FreshVarHandler())
        return defmap

    def _fix_ssa_vars(blocks, labels, varname, defmap, cfg, df_plus, cache_list_vars) -> None:
        states = ssa._make_states(blocks)
        states["varname"] = varname
        states["defmap"] = defmap
        states["phimap"] = phimap = defaultdict[Any, list](list)
        states["cfg"] = cfg
        states["phi_locations"] = ssa._compute_phi_locations(df_plus, defmap)
        _rewrite(blocks, labels, states, ssa._FixSSAVars(cache_list_vars))
        for label, philist in phimap.items():
            block = blocks[label]
            block.body = philist + block.body

    def _rewrite(blocks: dict, labels: list, states: dict, handler) -> None:
        for label in labels:
            block = blocks[label]
            states["label"] = label
            states["block"] = block
            # the whole new body first: the handlers look up positions in the current one
            block.body = list(ssa._run_ssa_block_pass(states, block, handler))

    return _run_ssa


def _blocks_naming(blocks: dict, varnames, cache_list_vars) -> dict[str, list]:
    """For each of ``varnames``, the labels (in block order) of the blocks that assign or use it."""
    wanted = set(varnames)
    naming: dict[str, list] = {name: [] for name in varnames}
    for label, block in blocks.items():
        named: set[str] = set()
        for stmt in block.body:
            named.update(var.name for var in cache_list_vars.get(stmt))
        for name in named & wanted:
            naming[name].append(label)
    return naming


def _copy_block(ir: ModuleType, block: Any) -> Any:
    copied = ir.Block(scope=block.scope, loc=block.loc)
    copied.body = list(block.body)
    return copied


def replaced(module_name: str):
    """The ``_run_ssa`` that `install` replaced in ``module_name`` (to compare with)."""
    return _REPLACED.get(module_name)


def install() -> None:
    """Use `run_ssa_for` in the place of Numba's and numba-cuda's ``_run_ssa``, in each module as
    it is imported (idempotent)."""
    for name in _MODULES:
        patch_when_imported(name, _patch)


def _patch(ssa: Any) -> None:
    own = getattr(ssa, "_run_ssa", None)
    if getattr(own, "__module__", None) != ssa.__name__:  # ours already, or someone else's
        return
    _REPLACED.setdefault(ssa.__name__, own)
    ours = run_ssa_for(ssa)
    ours.__module__ = __name__
    ssa._run_ssa = ours
