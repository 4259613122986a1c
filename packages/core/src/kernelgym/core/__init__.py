"""kernelgym.core: backends, write-once kernels bound by name, device RNG, data and function managers.

Importing this package neither imports torch nor compiles a kernel. Its names are
imported on first use, so that a caller of one module (the ``kernelgym`` command asking
for `resolve_backend`, say) does not pay for numba-cuda and the binding machinery.
"""

import importlib
from importlib import metadata as _metadata

from kernelgym.core import helper_cache as _helper_cache

# before any helper is first called: a cut-short Numba cache file of one is recompiled, not fatal
_helper_cache.install()

__version__ = _metadata.version("kernelgym-core")  # set by the repository's VERSION file

# name -> the submodule that defines it
_EXPORTS = {
    "resolve_backend": "backends",
    "BackendUnavailableError": "backends",
    "DataFeed": "data_feed",
    "CUDADataManager": "data_manager",
    "FunctionManager": "function_manager",
    "env_kernel": "kernels",
    "agent_kernel": "kernels",
    "bind": "binding",
    "bind_launches": "binding",
    "Branch": "binding",
    "BindingError": "binding",
    "atomic_add": "device_functions",
    "device_function": "device_functions",
    "rng": None,  # the submodule itself
    "to_torch": "arrays",
    "to_numpy": "arrays",
    "to_dlpack": "arrays",
}

__all__ = list(_EXPORTS)


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'kernelgym.core' has no attribute {name!r}")
    module = _EXPORTS[name]
    if module is None:
        value = importlib.import_module(f"kernelgym.core.{name}")
    else:
        value = getattr(importlib.import_module(f"kernelgym.core.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
