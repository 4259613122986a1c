"""kernelgym.core: backends, write-once kernels bound by name, device RNG, data and function managers.

Importing this package neither imports torch nor compiles a kernel.
"""

from importlib import metadata as _metadata

from kernelgym.core import helper_cache as _helper_cache
from kernelgym.core import rng
from kernelgym.core.arrays import to_dlpack, to_numpy, to_torch
from kernelgym.core.backends import BackendUnavailableError, resolve_backend
from kernelgym.core.binding import BindingError, Branch, bind, bind_launches
from kernelgym.core.data_feed import DataFeed
from kernelgym.core.data_manager import CUDADataManager
from kernelgym.core.device_functions import atomic_add, device_function
from kernelgym.core.function_manager import FunctionManager
from kernelgym.core.kernels import agent_kernel, env_kernel

# before any helper is first called: a cut-short Numba cache file of one is recompiled, not fatal
_helper_cache.install()

__version__ = _metadata.version("kernelgym-core")  # set by the repository's VERSION file

__all__ = [
    "resolve_backend",
    "BackendUnavailableError",
    "DataFeed",
    "CUDADataManager",
    "FunctionManager",
    "env_kernel",
    "agent_kernel",
    "bind",
    "bind_launches",
    "Branch",
    "BindingError",
    "atomic_add",
    "device_function",
    "rng",
    "to_torch",
    "to_numpy",
    "to_dlpack",
]
