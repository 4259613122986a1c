"""Numba's own disk cache of kernelgym's ``njit(cache=True)`` helpers, recovered when cut short.

The launchers' cache is sealed and checked (`kernelgym.core.disk_cache`). The helpers that
kernelgym's modules compile with ``numba.njit(cache=True)`` (portable math, the envs'
physics, the runtime's loops) keep Numba's plain ``.nbi`` index and ``.nbc`` data files next
to their source (or under ``NUMBA_CACHE_DIR``). One cut short by a full disk or a killed
process made every later run end in an ``UnpicklingError`` that named no file. `install`
makes Numba's cache reader treat a kernelgym file it cannot parse as a miss: the file is
removed with a `CacheWarning` naming it and its folder, and the helper is compiled again.
Files outside kernelgym's packages are left to Numba as they are.
"""

from __future__ import annotations

from numba.core import caching

from kernelgym.core.disk_cache import _discard

__all__ = ["install"]


def _ours(cache_file) -> bool:
    """Whether a Numba cache file belongs to a function of a kernelgym module (tagged by `install`)."""
    return getattr(cache_file, "_kernelgym_helper", False)


def install() -> None:
    """Make Numba's cache reader recover kernelgym's unreadable ``.nbi``/``.nbc`` files (idempotent)."""
    cache_file = caching.IndexDataCacheFile
    if getattr(cache_file, "_kernelgym_recovers", False):
        return
    load_index, load_data = cache_file._load_index, cache_file._load_data
    cache_init = caching.Cache.__init__

    def tagging_init(self, py_func):
        cache_init(self, py_func)
        # cache folders are named by hash under NUMBA_CACHE_DIR: the function tells whose file it is
        module = getattr(py_func, "__module__", None) or ""
        self._cache_file._kernelgym_helper = module == "kernelgym" or module.startswith("kernelgym.")

    def recovering_load_index(self):
        try:
            return load_index(self)
        except Exception as error:  # pickle.UnpicklingError, EOFError, ...: what a cut pickle raises
            if not _ours(self):
                raise
            _discard(self._index_path, self._cache_path, f"{type(error).__name__}: {error}")
            return {}

    def recovering_load_data(self, name):
        try:
            return load_data(self, name)
        except OSError:
            raise  # Numba's load() takes a missing data file as a miss
        except Exception as error:
            path = self._data_path(name)
            if not _ours(self):
                raise
            _discard(path, self._cache_path, f"{type(error).__name__}: {error}")
            return None

    caching.Cache.__init__ = tagging_init
    cache_file._load_index, cache_file._load_data = recovering_load_index, recovering_load_data
    cache_file._kernelgym_recovers = True
