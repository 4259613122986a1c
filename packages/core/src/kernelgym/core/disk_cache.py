"""The launchers' disk cache: a folder that can be written, and entries that are checked.

A launcher's compiled code (Numba's ``.nbi`` index and ``.nbc`` data files) is loaded from
disk by every later process. A file cut short by a full disk or a killed process, or
altered in any way, would otherwise make every later run fail (``UnpicklingError``) or, with
a flipped byte in the machine code, run wrong code. So every file written ends with a seal
(a marker and the SHA-256 of what precedes it; Numba's own reader ignores bytes after its
pickle), and a file whose seal does not match, or that cannot be read or parsed, is removed
and its kernel compiled again, with a `CacheWarning` naming the folder and the file. A cache
that cannot be written only costs the next process a compile: a warning, not an error.

A ``KERNELGYM_CACHE_DIR`` that cannot hold the launchers (a file, not writable, ...) gives a
warning and a fresh temporary folder, named in the warning, for this process (removed at its exit).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import io
import os
import pickle
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

from numba.core.cpu import CPUContext
from numba.core.runtime.nrt import rtsys

__all__ = ["CacheWarning", "usable_folder", "check_cache_of", "load_without_refresh"]

SEAL_MARKER = b"kgseal01"
SEAL_SIZE = len(SEAL_MARKER) + hashlib.sha256().digest_size


class CacheWarning(UserWarning):
    """A compile cache entry or folder kernelgym could not use (it rebuilt or moved it)."""


@functools.cache
def usable_folder(folder: Path, setting: str) -> Path:
    """``folder`` once a file was written and removed in it, else a new temporary folder.

    Parameters
    ----------
    folder : pathlib.Path
        The folder wanted (created if missing).
    setting : str
        What chose it (e.g. ``"KERNELGYM_CACHE_DIR='/x'"``), for the warning.

    Returns
    -------
    pathlib.Path
        ``folder``, or a fresh ``tempfile.mkdtemp`` folder (with a `CacheWarning` naming
        both) where ``folder`` cannot be created or written.
    """
    try:
        folder.mkdir(parents=True, exist_ok=True)
        # os.access is not proof (read-only mounts, /proc, ACLs): write a file
        with tempfile.TemporaryFile(dir=folder):
            pass
        return folder
    except OSError as error:
        # mkdtemp: a folder only this user can write, never another user's launcher code
        temporary = tempfile.mkdtemp(prefix="kernelgym-cache-")
        atexit.register(shutil.rmtree, temporary, ignore_errors=True)
        fallback = Path(temporary) / folder.name
        fallback.mkdir()
        warnings.warn(
            f"kernelgym: the compile cache folder {str(folder)!r} ({setting}) cannot be written "
            f"({error.strerror or error}); this process caches its kernels in the temporary folder "
            f"{str(fallback)!r} instead",
            CacheWarning,
            stacklevel=2,
        )
        return fallback


def check_cache_of(dispatcher) -> None:
    """Seal and check the disk cache of a Numba dispatcher (cpu ``njit`` or ``cuda.jit``).

    A dispatcher without a disk cache (the simulator's kernels) is left as it is.
    """
    cache: Any = getattr(dispatcher, "_cache", None)  # numba's cache object (untyped); None: no disk cache
    cache_file = getattr(cache, "_cache_file", None)
    if cache_file is None or getattr(cache_file, "_kernelgym_checked", False):
        return
    folder = cache.cache_path
    load_overload, save_overload = cache.load_overload, cache.save_overload

    def checked_load_overload(sig, target_context):
        try:
            if isinstance(target_context, CPUContext):
                return load_without_refresh(cache, sig, target_context)
            return load_overload(sig, target_context)
        except Exception as error:
            _warn(
                f"a compiled kernel in the cache folder {folder!r} could not be loaded "
                f"({type(error).__name__}: {error}); compiling it again"
            )
            return None

    def checked_save_overload(sig, data):
        try:
            save_overload(sig, data)
        except OSError as error:
            name = error.filename2 or error.filename  # os.replace's destination, else the file
            where = f"as {os.path.basename(name)!r} " if name else ""
            _warn(
                f"the compiled kernel could not be saved {where}in the cache folder {folder!r} "
                f"({error.strerror or error}); the next process compiles it again"
            )

    cache.load_overload, cache.save_overload = checked_load_overload, checked_save_overload
    open_for_write = cache_file._open_for_write

    @contextlib.contextmanager
    def sealed_open_for_write(path):
        buffer = io.BytesIO()
        yield buffer
        content = buffer.getvalue()
        if os.path.isdir(path) and not os.path.islink(path):  # os.replace cannot replace a folder
            _discard(path, folder, "a folder in its place", then="saving the kernel in its place")
        with open_for_write(path) as file:
            file.write(content + SEAL_MARKER + hashlib.sha256(content).digest())

    def checked_load_index():
        content = _read_sealed(cache_file._index_path, folder)
        if content is None:
            return {}
        try:
            stream = io.BytesIO(content)
            if pickle.load(stream) != cache_file._version:
                return {}  # another Numba's index (as Numba does)
            stamp, overloads = pickle.loads(stream.read())
        except Exception as error:
            _discard(cache_file._index_path, folder, f"{type(error).__name__}: {error}")
            return {}
        return overloads if stamp == cache_file._source_stamp else {}

    def checked_load_data(name):
        path = cache_file._data_path(name)
        content = _read_sealed(path, folder)
        if content is None:
            return None
        try:
            return pickle.loads(content)
        except Exception as error:
            _discard(path, folder, f"{type(error).__name__}: {error}")
            return None

    cache_file._open_for_write = sealed_open_for_write
    cache_file._load_index, cache_file._load_data = checked_load_index, checked_load_data
    cache_file._kernelgym_checked = True


def load_without_refresh(cache, sig, target_context):
    """Numba's ``Cache.load_overload`` for the cpu target, without refreshing the target first.

    Numba refreshes the target context before each cache load: it imports and registers all
    of its typing and lowering modules (``numba.cpython``, ``numba.np``, ...), about 1 s, the
    largest part of a ``make()`` whose launchers are all cached. Rebuilding cached machine
    code needs none of it, only Numba's runtime (NRT), which compiled code calls and which
    this starts (as the refresh would). A compile refreshes the context itself
    (``CompilerBase.__init__``), so a later cache miss compiles as before.

    Returns
    -------
    numba.core.compiler.CompileResult or None
        The rebuilt overload, or None where the cache holds none for ``sig``.
    """
    rtsys.initialize(target_context)
    with cache._guard_against_spurious_io_errors():
        return cache._load_overload(sig, target_context)


def _read_sealed(path: str, folder: str) -> bytes | None:
    """The content of a sealed cache file; None where it is missing, or unreadable (then removed)."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        _discard(path, folder, error.strerror or str(error))
        return None
    content, seal = raw[:-SEAL_SIZE], raw[-SEAL_SIZE:]
    if len(raw) >= SEAL_SIZE and seal == SEAL_MARKER + hashlib.sha256(content).digest():
        return content
    _discard(path, folder, "truncated or corrupted: its checksum does not match")
    return None


def _discard(path: str, folder: str, problem: str, then: str = "compiling the kernel again") -> None:
    """Remove an unusable cache entry (file or folder), with a warning naming it and its folder."""
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.remove(path)
        outcome = f"removed it; {then}"
    except OSError as error:
        outcome = f"could not remove it ({error.strerror or error}); {then}"
    _warn(
        f"the compile cache file {os.path.basename(path)!r} in the folder {folder!r} cannot be read "
        f"({problem}); {outcome}"
    )


def _warn(message: str) -> None:
    warnings.warn(f"kernelgym: {message}", CacheWarning, stacklevel=3)
