"""Say on stderr, once, before an env's kernels compile: ``compiling CartPole-v1 for cpu ...``.

A first run compiles an env's launchers (a minute or more) before anything else shows;
later processes load them from Numba's on-disk cache. While `compile_notice` is active
(``KernelVectorEnv`` activates it around its binding), the first real compilation of a
cached launcher prints one line naming the env and the backend, before the compile
starts. Numba announces a real compilation as a ``numba:compile`` event and a load from
its disk cache as none, so a warm cache prints nothing. Each (env, backend) is announced
once per process.

``KERNELGYM_COMPILE_NOTICE=0`` silences the line (``1``, the default, keeps it). On the
cuda backend numba-cuda 0.30's dispatcher announces no compilation on its event bus, but it
builds a kernel object only on a cache miss: `hook_cuda_compiles` announces there.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import sys

__all__ = ["NOTICE_VARIABLE", "compile_notice", "hook_cuda_compiles", "notice_enabled", "notice_text", "silenced"]

NOTICE_VARIABLE = "KERNELGYM_COMPILE_NOTICE"
_SETTINGS = {"1": True, "0": False, "": True}

# the (env, backend) a compile in this thread or task would be for; None: say nothing
_current: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar("kernelgym_compile", default=None)
_announced: set[tuple[str, str]] = set()


def notice_enabled() -> bool:
    """Whether ``KERNELGYM_COMPILE_NOTICE`` lets the line print.

    Raises
    ------
    ValueError
        A value other than ``0``, ``1`` or empty, naming the variable.
    """
    value = os.environ.get(NOTICE_VARIABLE, "").strip()
    if value not in _SETTINGS:
        raise ValueError(f"{NOTICE_VARIABLE}: expected '0' (silent) or '1' (print the compile line), got {value!r}")
    return _SETTINGS[value]


def notice_text(env_id: str, backend: str) -> str:
    """The line printed before ``env_id``'s first compile for ``backend``."""
    return f"compiling {env_id} for {backend} (first run only, cached after)"


@contextlib.contextmanager
def compile_notice(env_id: str, backend: str):
    """While the block runs, the first real compile of a cached launcher prints `notice_text`
    to stderr (once per ``(env_id, backend)`` and process; never on a disk-cache load).

    Raises
    ------
    ValueError
        On entry, before anything compiles, for a bad ``KERNELGYM_COMPILE_NOTICE``.
    """
    label = (env_id, backend) if notice_enabled() else None
    token = _current.set(label)
    try:
        yield
    finally:
        _current.reset(token)


@contextlib.contextmanager
def silenced():
    """No line while the block runs (for callers that say it in their own words, like the kit)."""
    token = _current.set(None)
    try:
        yield
    finally:
        _current.reset(token)


def on_compile_start(compile_event) -> None:
    """Print the line for the active env, at the start of an outermost compile of a function
    whose build Numba keeps on disk (what a later process loads instead of compiling)."""
    if disk_cached(compile_event):
        _announce()


def _announce() -> None:
    """Print the active env's line, once per (env, backend) and process."""
    label = _current.get()
    if label is None or label in _announced:
        return
    _announced.add(label)
    print(notice_text(*label), file=sys.stderr, flush=True)


def hook_cuda_compiles() -> bool:
    """Announce numba-cuda's kernel compiles too (idempotent).

    numba-cuda's ``CUDADispatcher`` announces no compilation on its event bus (0.30), but it
    constructs its ``_Kernel`` only when neither memory nor its disk cache holds the kernel:
    the line is printed as that construction starts.

    Returns
    -------
    bool
        Whether the hook is in place (False without numba-cuda's dispatcher, as in the
        simulator, whose kernels compile nothing).
    """
    try:
        from numba.cuda import dispatcher
    except ImportError:
        return False
    kernel_class = getattr(dispatcher, "_Kernel", None)
    if kernel_class is None:
        return False
    original = kernel_class.__init__
    if getattr(original, "_kernelgym_announces", False):
        return True

    @functools.wraps(original)
    def announcing(self, *args, **kwargs):
        _announce()
        original(self, *args, **kwargs)

    announcing._kernelgym_announces = True  # type: ignore[attr-defined]
    kernel_class.__init__ = announcing
    return True


def disk_cached(compile_event) -> bool:
    """Whether the function being compiled keeps its build on disk (``cache=True``): helpers
    without a disk cache compile in every process in well under a second and say nothing."""
    dispatcher = (compile_event.data or {}).get("dispatcher")
    cache = getattr(dispatcher, "_cache", None)
    return cache is not None and type(cache).__name__ != "NullCache"
