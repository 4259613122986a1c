"""Patch a module of Numba's now if it is imported, else the moment it is first imported.

Some of Numba's modules pull in its lowering and parallel machinery (0.5 s and more), which a
process whose launchers all come from the disk cache never needs
(`kernelgym.core.disk_cache`): kernelgym patches them without importing them.
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Callable
from types import ModuleType

__all__ = ["patch_when_imported"]


def patch_when_imported(name: str, patch: Callable[[ModuleType], None]) -> None:
    """Run ``patch(module)`` on module ``name`` now if it is imported, else once it has run its
    body at its first import (idempotent per ``name``: a second call while waiting adds nothing)."""
    module = sys.modules.get(name)
    if module is not None:
        patch(module)
    elif not any(isinstance(finder, _PatchAtImport) and finder.name == name for finder in sys.meta_path):
        sys.meta_path.insert(0, _PatchAtImport(name, patch))


class _PatchAtImport(importlib.abc.MetaPathFinder):
    """Finds one module with the other finders and patches it once it has run (then leaves)."""

    def __init__(self, name: str, patch: Callable[[ModuleType], None]):
        self.name = name
        self.patch = patch

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = next(
            (
                found
                for finder in sys.meta_path
                if hasattr(finder, "find_spec") and (found := finder.find_spec(fullname, path, target)) is not None
            ),
            None,
        )
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module
        patch = self.patch

        def run_and_patch(module):
            run(module)
            patch(module)

        spec.loader.exec_module = run_and_patch  # this module's loader only
        return spec
