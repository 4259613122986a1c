"""Each distribution declares exactly what its source imports: nothing missing, nothing extra.

The source of each distribution is scanned (AST, every import statement, also inside
functions), and each imported top-level module is mapped to the distribution that
provides it (`importlib.metadata.packages_distributions`; this needs everything
installed, as in tox's `integration` env). Then, for each distribution:

- an import at module level, outside an ``ImportError`` guard, needs a required
  dependency;
- an import inside a function or an ``ImportError`` guard (an optional feature) needs a
  required dependency or one in an extra;
- every declared dependency, required or in an extra, is imported somewhere.
"""

from __future__ import annotations

import ast
import dataclasses
import pathlib
import sys
from importlib.metadata import packages_distributions

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = pathlib.Path(__file__).resolve().parents[1]
DISTRIBUTIONS = {
    "kernelgym-core": ROOT / "packages" / "core",
    "kernelgym-envs": ROOT / "packages" / "envs",
    "kernelgym-collectors": ROOT / "packages" / "collectors",
    "kernelgym-memory": ROOT / "packages" / "memory",
    "kernelgym": ROOT,  # the CLI in src/kernelgym/cli, and the meta-distribution of the four
}
# Modules that another distribution provides under a name it shares: numba-cuda replaces
# numba's own `numba.cuda` (see ARCHITECTURE.md, Backends).
MODULE_PROVIDERS = {
    "numba.cuda": "numba-cuda",
    "cuda.pathfinder": "cuda-pathfinder",
    "cuda.bindings": "cuda-bindings",
    "cuda.core": "cuda-core",
}
# The meta-distribution installs the four packages whether or not the CLI imports them.
META_DEPENDENCIES = {"kernelgym": {"kernelgym-core", "kernelgym-envs", "kernelgym-collectors", "kernelgym-memory"}}
# Wheels that ship programs, found on disk rather than imported: NVIDIA's ptxas for the
# GPU-compile table (located by cuda.pathfinder).
BINARY_DEPENDENCIES = {"kernelgym-core": {"nvidia-cuda-nvcc-cu12"}}
# Extras that another library imports on the user's behalf: gymnasium's RecordVideo writes
# the videos of kernelgym's rendered envs with moviepy.
IMPORTED_BY_OTHERS = {"kernelgym-envs": {"moviepy"}}
# Subpackages that exist for one extra (imported only by users of that extra): what they
# import, module level included, counts as optional, so it must be declared in an extra.
EXTRA_SUBPACKAGES = {"kernelgym-collectors": {"kernelgym/collectors/ray": "ray"}}


@dataclasses.dataclass
class Imports:
    required: set[str] = dataclasses.field(default_factory=set)  # module level, unguarded
    optional: set[str] = dataclasses.field(default_factory=set)  # in a function or an ImportError guard


def _guards_import_error(node: ast.Try) -> bool:
    names = []
    for handler in node.handlers:
        caught = handler.type
        items = caught.elts if isinstance(caught, ast.Tuple) else [caught]
        names += [item.id for item in items if isinstance(item, ast.Name)]
    return bool({"ImportError", "ModuleNotFoundError"} & set(names))


def _top_modules(node) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return [node.module]
    return []


def _scan(tree: ast.AST, imports: Imports, optional: bool = False) -> None:
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
            continue  # annotations only, never imported at run time
        for module in _top_modules(child):
            (imports.optional if optional else imports.required).add(module)
        nested = (
            optional
            or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            or (isinstance(child, ast.Try) and _guards_import_error(child))
        )
        _scan(child, imports, nested)


def _distribution_of(module: str, providers: dict[str, list[str]]) -> str | None:
    """The distribution providing ``module`` (None for the standard library)."""
    for prefix, provider in MODULE_PROVIDERS.items():
        if module == prefix or module.startswith(prefix + "."):
            return provider
    top = module.split(".")[0]
    if top in sys.stdlib_module_names or top == "__future__":
        return None
    if top == "kernelgym":  # a PEP 420 namespace: the second part names the distribution
        part = module.split(".")[1]
        return "kernelgym" if part == "cli" else f"kernelgym-{part}"
    found = providers.get(top)
    # not installed here (an extra this env leaves out): its import name is its distribution name
    return canonicalize_name(found[0] if found else top)


def imported_distributions(distribution: str) -> tuple[set[str], set[str]]:
    """(distributions imported unguarded at module level, distributions imported only optionally)."""
    source = DISTRIBUTIONS[distribution] / "src"
    own = "kernelgym/cli" if distribution == "kernelgym" else f"kernelgym/{distribution.removeprefix('kernelgym-')}"
    imports = Imports()
    extra_folders = [source / folder for folder in EXTRA_SUBPACKAGES.get(distribution, {})]
    for path in (source / own).rglob("*.py"):
        for_an_extra = any(folder in path.parents for folder in extra_folders)
        _scan(ast.parse(path.read_text(), filename=str(path)), imports, optional=for_an_extra)
    providers = packages_distributions()
    required = {_distribution_of(module, providers) for module in imports.required} - {None, distribution}
    optional = {_distribution_of(module, providers) for module in imports.optional} - {None, distribution}
    return required, optional - required


def declared_dependencies(distribution: str) -> tuple[set[str], dict[str, set[str]]]:
    """(required dependencies, {extra: dependencies}) from the pyproject.toml, as distribution names."""
    project = tomllib.loads((DISTRIBUTIONS[distribution] / "pyproject.toml").read_text())["project"]

    def names(requirements):
        return {canonicalize_name(Requirement(text).name) for text in requirements}

    extras = {extra: names(requirements) for extra, requirements in project.get("optional-dependencies", {}).items()}
    return names(project.get("dependencies", [])), extras


@pytest.mark.parametrize("distribution", sorted(DISTRIBUTIONS))
def test_every_import_is_declared(distribution):
    required, optional = imported_distributions(distribution)
    declared, extras = declared_dependencies(distribution)
    in_extras = set().union(*extras.values())
    assert required <= declared, (
        f"{distribution} imports {sorted(required - declared)} at module level without declaring them "
        f"in [project] dependencies"
    )
    assert optional <= declared | in_extras, (
        f"{distribution} imports {sorted(optional - declared - in_extras)} (in a function or an ImportError "
        f"guard) without declaring them in dependencies or an extra"
    )


@pytest.mark.parametrize("distribution", sorted(DISTRIBUTIONS))
def test_every_declared_dependency_is_imported(distribution):
    required, optional = imported_distributions(distribution)
    declared, extras = declared_dependencies(distribution)
    unused = declared - required - optional - META_DEPENDENCIES.get(distribution, set())
    assert not unused, f"{distribution} declares {sorted(unused)} but never imports them"
    for extra, dependencies in extras.items():
        binaries = BINARY_DEPENDENCIES.get(distribution, set()) | IMPORTED_BY_OTHERS.get(distribution, set())
        unused = {name for name in dependencies if name not in optional | required | binaries and name != distribution}
        assert not unused, f"{distribution}[{extra}] declares {sorted(unused)} but never imports them"


# numba-cuda has no macOS wheel (and no sdist), and cuda-bindings and cuda-core come with it:
# a required dependency on any of them would make the cpu backend uninstallable there (issue 38).
CUDA_STACK = {"numba-cuda", "cuda-bindings", "cuda-core", "cuda-pathfinder"}


@pytest.mark.parametrize("distribution", sorted(DISTRIBUTIONS))
def test_the_cuda_stack_is_only_ever_an_extra(distribution):
    declared, extras = declared_dependencies(distribution)
    assert not declared & CUDA_STACK, (
        f"{distribution} requires {sorted(declared & CUDA_STACK)}: put them in kernelgym-core's cuda extra"
    )
    if distribution == "kernelgym-core":
        assert {"numba-cuda", "cuda-bindings", "cuda-core"} <= extras["cuda"]
        # the compiler wheels are useless without the stack they compile for
        assert any(Requirement(text).extras == {"cuda"} for text in _extra_requirements(distribution, "gpu-compile"))


def _extra_requirements(distribution: str, extra: str) -> list[str]:
    project = tomllib.loads((DISTRIBUTIONS[distribution] / "pyproject.toml").read_text())["project"]
    return project["optional-dependencies"][extra]


def test_the_scan_sees_guarded_and_function_level_imports():
    imports = Imports()
    _scan(
        ast.parse(
            "import numpy\ntry:\n    import ray\nexcept ImportError:\n    ray = None\n"
            "def f():\n    import torch\nif TYPE_CHECKING:\n    import pandas\n"
        ),
        imports,
    )
    assert imports.required == {"numpy"} and imports.optional == {"ray", "torch"}
