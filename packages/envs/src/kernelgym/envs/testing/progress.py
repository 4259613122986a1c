"""`compile_progress`: say on stderr when a check compiles an env's kernels, and for how long.

The first check of a new env compiles its launchers (minutes on a busy machine); later
runs load them from Numba's on-disk cache. Numba announces each real compilation (not a
cache load) as a ``numba:compile`` event, so the line appears only when compiling happens.
"""

from __future__ import annotations

import contextlib
import sys
import time

from numba.core import event

__all__ = ["compile_progress"]

COMPILE_EVENT = "numba:compile"


class _CompileListener(event.Listener):
    """Announces the first compilation of a cached function, and adds up the seconds of the
    outermost ones. Functions without an on-disk cache (a device function a reference calls
    from Python) compile in every process in well under a second: they are not announced."""

    def __init__(self, announcement: str):
        self.announcement = announcement
        self.announced = False
        self.depth = 0  # compiling a launcher compiles the functions it calls, nested
        self.counting = False
        self.started = 0.0
        self.seconds = 0.0

    def on_start(self, compile_event):
        if self.depth == 0:
            self.counting = _cached(compile_event)
            if self.counting and not self.announced:
                print(self.announcement, end="", file=sys.stderr, flush=True)
                self.announced = True
            self.started = time.perf_counter()
        self.depth += 1

    def on_end(self, _event):
        self.depth -= 1
        if self.depth == 0 and self.counting:
            self.seconds += time.perf_counter() - self.started


def _cached(compile_event) -> bool:
    """Whether the function being compiled keeps its build on disk (``cache=True``)."""
    dispatcher = (compile_event.data or {}).get("dispatcher")
    cache = getattr(dispatcher, "_cache", None)
    return cache is not None and type(cache).__name__ != "NullCache"


def _event_modules(backend: str) -> list:
    """numba's event module, and numba-cuda's own (its dispatcher announces there) on cuda."""
    modules = [event]
    if backend == "cuda":
        with contextlib.suppress(ImportError):
            from numba.cuda.core import event as cuda_event

            if cuda_event is not event:
                modules.append(cuda_event)
    return modules


@contextlib.contextmanager
def compile_progress(env_id: str, backend: str, phase: str, enabled: bool = True):
    """While the block runs, print one stderr line if it compiles: what, for whom, and the seconds.

    Parameters
    ----------
    env_id, backend : str
        Named in the line.
    phase : str
        What is running (a check's name).
    enabled : bool
        False: do nothing (the Python API's default).
    """
    if not enabled:
        yield
        return
    listener = _CompileListener(f"kernelgym check: compiling {env_id} kernels for {backend}, check {phase} "
                                "(first run; cached afterwards)...")
    modules = _event_modules(backend)
    for module in modules:
        module.register(COMPILE_EVENT, listener)
    try:
        yield
    finally:
        for module in modules:
            module.unregister(COMPILE_EVENT, listener)
        if listener.announced:
            print(f" {listener.seconds:.1f} s", file=sys.stderr, flush=True)
