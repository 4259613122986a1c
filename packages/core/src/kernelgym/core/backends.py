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
"""

from __future__ import annotations

import functools
import logging
import os
import threading

import numba

BACKENDS = ("cuda", "cpu", "sim")
BACKEND_NAMES = BACKENDS + ("auto",)
BACKEND_ENV_VAR = "KERNELGYM_BACKEND"

logger = logging.getLogger(__name__)


class BackendUnavailableError(RuntimeError):
    """The backend that was asked for cannot run in this process (the message says why)."""


def simulator_enabled() -> bool:
    """Whether Numba's CUDA simulator replaced ``numba.cuda`` in this process.

    Numba reads ``NUMBA_ENABLE_CUDASIM`` once, when it is first imported; setting the
    variable later changes nothing.
    """
    return bool(numba.config.ENABLE_CUDASIM)


@functools.lru_cache(maxsize=1)
def gpu_unavailable_reason() -> str | None:
    """Why the ``cuda`` backend cannot run here, or ``None`` when a GPU is usable."""
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
        ``"cuda"`` without a usable GPU, or ``"sim"`` when ``NUMBA_ENABLE_CUDASIM=1`` was
        not set before numba was imported.
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
        reason = gpu_unavailable_reason()
        if reason is not None:
            raise BackendUnavailableError(f"backend 'cuda' is unavailable: {reason}")
    if key == "sim" and not simulator_enabled():
        late = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
        detail = (
            "NUMBA_ENABLE_CUDASIM=1 was set only after numba had been imported"
            if late
            else "NUMBA_ENABLE_CUDASIM=1 is not set"
        )
        raise BackendUnavailableError(
            f"backend 'sim' is unavailable: {detail}; set it in the environment before "
            "the process imports numba (e.g. `NUMBA_ENABLE_CUDASIM=1 python ...`)"
        )
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
