"""`exit_process`: a command's exit, without freeing what the process compiled one object at a time."""

from __future__ import annotations

import gc
import sys
from typing import NoReturn

__all__ = ["exit_process"]


def exit_process(code: int) -> NoReturn:
    """Exit the process with ``code`` (`sys.exit`: ``atexit`` handlers and ``finally`` blocks run).

    A process that compiled numba programs holds many thousands of objects (their LLVM
    modules, numba's typing caches) that the interpreter's last garbage collection frees
    one by one: 1-2 s at the exit of a ``kernelgym check`` on a 2-core machine. Frozen
    (`gc.freeze`), they are left to the operating system with the rest of the process's
    memory. For commands' entry points only: a process that goes on would never free them.
    """
    gc.freeze()
    sys.exit(code)
