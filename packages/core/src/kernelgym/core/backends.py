"""Backend names and how a name becomes a usable backend.

A backend says where kernels run and what kind of arrays they take:

========  ==============================================  =========================
name      kernels                                          arrays
========  ==============================================  =========================
``cuda``  numba-cuda kernels on a GPU                      numba device arrays
``cpu``   ``numba.njit(parallel=True)`` prange loops       numpy arrays
``sim``   the same ``cuda.jit`` kernels in Numba's CUDA     simulator device arrays
          simulator (``NUMBA_ENABLE_CUDASIM=1``)
========  ==============================================  =========================

``auto`` picks ``cuda`` when a GPU is usable, else ``cpu``.

``cuda`` and ``sim`` need the ``cuda`` extra (``pip install "kernelgym-core[cuda]"``:
numba-cuda and its cuda-bindings and cuda-core); ``cpu`` needs numba only, so it also runs
where numba-cuda has no wheel (macOS).
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
import threading

import numba

BACKENDS = ("cuda", "cpu", "sim")
BACKEND_NAMES = BACKENDS + ("auto",)
BACKEND_ENV_VAR = "KERNELGYM_BACKEND"
#: The command that installs what the ``cuda`` and ``sim`` backends need.
CUDA_EXTRA_HINT = 'pip install "kernelgym-core[cuda]"'
# The `cuda` extra's distributions by the module each provides. numba-cuda's is `numba_cuda`
# (a .pth finder of its own redirects `numba.cuda` there): numba itself still ships a
# deprecated built-in `numba.cuda`, so importing `numba.cuda` does not tell whether it is installed.
CUDA_EXTRA_MODULES = {"numba_cuda": "numba-cuda", "cuda.bindings": "cuda-bindings", "cuda.core": "cuda-core"}

logger = logging.getLogger(__name__)


class BackendUnavailableError(RuntimeError):
    """The backend that was asked for cannot run in this process (the message says why)."""


def simulator_enabled() -> bool:
    """Whether Numba's CUDA simulator replaced ``numba.cuda`` in this process.

    Numba reads ``NUMBA_ENABLE_CUDASIM`` once, when it is first imported; setting the
    variable later changes nothing.
    """
    return bool(numba.config.ENABLE_CUDASIM)


def _importable(module: str) -> bool:
    """Whether ``module`` can be imported, without importing it (its parent package is)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # the parent package (`cuda` of `cuda.core`) is missing
        return False


@functools.lru_cache(maxsize=1)
def cuda_extra_missing() -> tuple[str, ...]:
    """The distributions of the ``cuda`` extra that are not installed (empty when all are).

    Nothing is imported: a cpu-only process does not pay for numba-cuda's import.
    """
    return tuple(distribution for module, distribution in CUDA_EXTRA_MODULES.items() if not _importable(module))


def cuda_extra_missing_reason() -> str | None:
    """What of the ``cuda`` extra is missing, and the command that installs it; ``None`` when nothing is."""
    missing = cuda_extra_missing()
    if not missing:
        return None
    verb = "is" if len(missing) == 1 else "are"
    return f"{', '.join(missing)} {verb} not installed (the 'cuda' extra); install it with `{CUDA_EXTRA_HINT}`"


@functools.lru_cache(maxsize=1)
def gpu_unavailable_reason() -> str | None:
    """Why the ``cuda`` backend cannot run here, or ``None`` when a GPU is usable."""
    missing = cuda_extra_missing_reason()
    if missing is not None:
        return missing
    if simulator_enabled():
        return (
            "NUMBA_ENABLE_CUDASIM=1 was set before numba was imported, so numba.cuda is the "
            "CUDA simulator in this process; use backend='sim' or unset the variable"
        )
    from numba import cuda

    try:
        if cuda.is_available():
            return None
    except Exception as error:
        return f"probing the CUDA driver failed: {error}"
    return "no usable CUDA GPU or driver was found (numba.cuda.is_available() is False)"


def gpu_usable() -> bool:
    """Whether the ``cuda`` backend can run in this process."""
    return gpu_unavailable_reason() is None


def resolve_backend(name: str | None = None) -> str:
    """Turn a backend name into one that can run here.

    Parameters
    ----------
    name : {"cuda", "cpu", "sim", "auto"} or None
        ``None`` reads the ``KERNELGYM_BACKEND`` environment variable, and falls back to
        ``"auto"`` when it is unset. ``"auto"`` is ``"cuda"`` when a GPU is usable, else
        ``"cpu"``. Case and surrounding spaces are ignored.

    Returns
    -------
    str
        ``"cuda"``, ``"cpu"`` or ``"sim"``.

    Raises
    ------
    ValueError
        The name is not one of the backend names.
    BackendUnavailableError
        ``"cuda"`` or ``"sim"`` without the ``cuda`` extra (numba-cuda), ``"cuda"`` without
        a usable GPU, or ``"sim"`` when ``NUMBA_ENABLE_CUDASIM=1`` was not set before numba
        was imported.

    Notes
    -----
    ``"auto"`` logs what it chose and why (the ``kernelgym.core.backends`` logger, level
    INFO): a usable GPU, or the reason there is none (numba-cuda not installed, no GPU or
    driver found, the simulator switched on).
    """
    source = "backend"
    if name is None:
        name = os.environ.get(BACKEND_ENV_VAR) or "auto"
        source = f"{BACKEND_ENV_VAR} environment variable"
    if not isinstance(name, str):
        raise TypeError(f"backend: expected a str, one of {BACKEND_NAMES}, got {type(name).__name__} {name!r}")
    key = name.strip().lower()
    if key not in BACKEND_NAMES:
        raise ValueError(f"{source}: expected one of {BACKEND_NAMES}, got {name!r}")
    if key == "auto":
        reason = gpu_unavailable_reason()
        chosen = "cpu" if reason else "cuda"
        _log_auto_choice(chosen, reason or "a usable CUDA GPU was found")
        return chosen
    if key == "cuda":
        # gpu_unavailable_reason names a missing cuda extra first, before anything imports numba.cuda
        reason = gpu_unavailable_reason()
        if reason is not None:
            raise BackendUnavailableError(f"backend 'cuda' is unavailable: {reason}")
    if key == "sim":
        # every missing piece at once: the extra and the variable are fixed in different places
        missing = cuda_extra_missing_reason()
        problems = [missing] if missing is not None else []
        if not simulator_enabled():
            late = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
            detail = (
                "NUMBA_ENABLE_CUDASIM=1 was set only after numba had been imported"
                if late
                else "NUMBA_ENABLE_CUDASIM=1 is not set"
            )
            problems.append(
                f"{detail}; set it in the environment before the process imports numba "
                "(e.g. `NUMBA_ENABLE_CUDASIM=1 python ...`)"
            )
        if problems:
            raise BackendUnavailableError("backend 'sim' is unavailable: " + "; and ".join(problems))
    return key


@functools.cache
def _log_auto_choice(chosen: str, why: str) -> None:
    """Log what ``auto`` chose, once per process and outcome (launches resolve it at every call)."""
    logger.info("backend 'auto' chose %r: %s", chosen, why)


def in_simulator_thread() -> bool:
    """Whether the caller runs inside a kernel thread of Numba's CUDA simulator."""
    if not simulator_enabled():
        return False
    from numba.cuda.simulator.kernel import BlockThread

    return isinstance(threading.current_thread(), BlockThread)
