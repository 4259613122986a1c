"""Load a script of this repository (a benchmark, a CI helper) as a module, by its path.

The scripts are not packages, and some sit in folders whose names would shadow a library
(``tests/packaging`` and the ``packaging`` distribution), so they are loaded by path.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_script(path: Path) -> ModuleType:
    """The module run from ``path`` (relative to the repository root, or absolute)."""
    path = ROOT / path
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"load_script path: expected a Python file, got {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
