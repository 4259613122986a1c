"""Process helpers shared by ``VectorSampledTasks`` and the rollout engines."""

from __future__ import annotations

import multiprocessing
from collections.abc import Sequence
from typing import Any


def get_context(start_method: str | None, *, argument: str = "start_method", preload: Sequence[str] = ()) -> Any:
    """The multiprocessing context of ``start_method`` (None: the platform's default).

    Parameters
    ----------
    start_method : str or None
        ``"fork"``, ``"forkserver"`` or ``"spawn"`` (where the platform has them).
    argument : str
        The caller's name for ``start_method``, used in the error message.
    preload : sequence of str
        Modules the fork server imports once, so that each worker forked from it starts
        with them loaded (ignored by the other start methods).

    Raises
    ------
    ValueError
        ``start_method`` is not a start method of this platform.
    """
    methods = multiprocessing.get_all_start_methods()
    if start_method is not None and start_method not in methods:
        raise ValueError(f"{argument} must be one of {methods}, got {start_method!r}")
    mp = multiprocessing.get_context(start_method)
    if preload and mp.get_start_method() == "forkserver":
        mp.set_forkserver_preload(list(preload))
    return mp


def reap(process: Any, timeout: float = 1.0) -> None:
    """Stop ``process`` for good: terminate it, wait ``timeout`` seconds, then kill it;
    returns once it has been joined (no zombie is left)."""
    if process.is_alive():
        process.terminate()
        process.join(timeout)
    if process.is_alive():
        process.kill()
    process.join()
