"""`compile_progress`: say on stderr when a check compiles an env's kernels, and for how long.

The first check of a new env compiles its launchers (minutes on a busy machine); later
runs load them from Numba's on-disk cache. Numba announces each real compilation (not a
cache load) as a ``numba:compile`` event, so the line appears only when compiling happens.

The line is printed, not logged: it is the user interface of ``kernelgym check`` (the
runner turns it on only for the command; the Python API's default is off), and it is one
line in two parts, the announcement before the wait and the seconds after it, which
logging's one-record-per-line cannot show. Each launcher's compilation is also logged
(`kernelgym.core.compile_log`).
"""

from __future__ import annotations

import contextlib
import sys
import time

from kernelgym.core.compile_log import COMPILE_EVENT, compile_events  # noqa: F401 (COMPILE_EVENT: this module's name too)
from kernelgym.core.compile_notice import silenced

__all__ = ["compile_progress"]


class _CompileListener:
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


class _SharedListener:
    """Forwards one bus's compile events to a `_CompileListener`."""

    def __init__(self, listener: _CompileListener):
        self.listener = listener

    def on_start(self, compile_event):
        self.listener.on_start(compile_event)

    def on_end(self, compile_event):
        self.listener.on_end(compile_event)


def _cached(compile_event) -> bool:
    """Whether the function being compiled keeps its build on disk (``cache=True``)."""
    dispatcher = (compile_event.data or {}).get("dispatcher")
    cache = getattr(dispatcher, "_cache", None)
    return cache is not None and type(cache).__name__ != "NullCache"


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
    listener = _CompileListener(
        f"kernelgym check: compiling {env_id} kernels for {backend}, check {phase} (first run; cached afterwards)..."
    )
    # numba's event bus, and on cuda numba-cuda's own (its dispatcher announces there, under
    # its own event kind, and it takes only listeners of its own Listener class)
    events = compile_events() if backend == "cuda" else compile_events()[:1]
    registered = []
    for module, kind in events:
        # one listener per bus, sharing the announcement and the seconds
        bus_listener = type("CompileListener", (_SharedListener, module.Listener), {})(listener)
        module.register(kind, bus_listener)
        registered.append((module, kind, bus_listener))
    try:
        with silenced():  # this line says it, for the check: not the env's own as well
            yield
    finally:
        for module, kind, bus_listener in registered:
            module.unregister(kind, bus_listener)
        if listener.announced:
            print(f" {listener.seconds:.1f} s", file=sys.stderr, flush=True)
