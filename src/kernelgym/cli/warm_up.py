"""``kernelgym compile``: fill the launchers' disk cache ahead of time (CI images, clusters).

Each env is made and run once per autoreset mode (a reset and a step with sampled actions),
which compiles every launcher that run needs, or loads it from Numba's disk cache (the two
modes compile different step programs: ``kernelgym demo`` and the collectors use
``same_step``, ``make``'s default is ``next_step``). Numba announces a
real compilation (not a cache load) as a ``numba:compile`` event: counting them tells
whether an env compiled or was already cached.
"""

from __future__ import annotations

import time
from typing import NamedTuple

from numba.core import event

from kernelgym.core.compile_log import COMPILE_EVENT
from kernelgym.core.compile_notice import disk_cached

__all__ = ["WarmUp", "warm_up", "describe", "env_counts"]


class WarmUp(NamedTuple):
    """One env's warm-up.

    Attributes
    ----------
    env_id, backend, autoreset_mode : str
    compiled : int or None
        How many disk-cached functions Numba compiled (0: everything came from the disk
        cache); None on cuda, where numba-cuda 0.30 announces no compilation.
    seconds : float
        Wall time of the make, the reset and the step.
    """

    env_id: str
    backend: str
    autoreset_mode: str
    compiled: int | None
    seconds: float


class _CompileCounter(event.Listener):
    """Counts the outermost compilations of disk-cached functions (a launcher's compile
    compiles the functions it calls, nested)."""

    def __init__(self):
        self.depth = 0
        self.compiled = 0

    def on_start(self, compile_event):
        if self.depth == 0 and disk_cached(compile_event):
            self.compiled += 1
        self.depth += 1

    def on_end(self, compile_event):
        self.depth -= 1


def warm_up(
    env_id: str, backend: str, num_envs: int, autoreset_mode: str = "next_step", precision: str | None = None
) -> WarmUp:
    """Make ``env_id`` and run a reset and a step, so that its launchers are compiled and cached.

    Parameters
    ----------
    env_id : str
        A registered id.
    backend : str
        A concrete backend ("cpu", "cuda" or "sim").
    num_envs : int
    autoreset_mode : str
        "next_step" or "same_step".
    precision : str or None
        The precision to compile for (None: the env's own).
    """
    import kernelgym.envs as kge

    counter = _CompileCounter()
    options = {"autoreset_mode": autoreset_mode} | ({} if precision is None else {"precision": precision})
    started = time.perf_counter()
    with event.install_listener(COMPILE_EVENT, counter):
        for count in env_counts(backend, num_envs):
            env = kge.make(env_id, num_envs=count, backend=backend, seed=0, **options)
            try:
                env.reset(seed=0)
                env.step(env.action_space.sample())
            finally:
                env.close()
    seconds = time.perf_counter() - started
    return WarmUp(env_id, backend, autoreset_mode, None if backend == "cuda" else counter.compiled, seconds)


def env_counts(backend: str, num_envs: int) -> tuple[int, ...]:
    """The env counts to make: ``num_envs``, and on cpu, where it runs the thread team, also
    one env, whose launches bind the serial twin (the team's launches compile that twin only
    at their first timed try, mid-run; fewer than `PARALLEL_FROM` envs always run it)."""
    from kernelgym.core import cpu_threads
    from kernelgym.core.binding import PARALLEL_FROM

    if backend == "cpu" and num_envs >= PARALLEL_FROM and cpu_threads.team_allowed():
        return (num_envs, 1)
    return (num_envs,)


def describe(result: WarmUp) -> str:
    """One line: whether ``result``'s env compiled or was already cached, and how long it took."""
    if result.compiled is None:
        what = "compiled or loaded from the disk cache (numba-cuda does not say which)"
    elif result.compiled:
        what = f"compiled ({result.compiled} functions, now in the disk cache)"
    elif result.backend == "sim":
        what = "nothing to compile (the simulator runs the kernels in Python)"
    else:
        what = "already cached (loaded from the disk cache)"
    return f"{result.env_id} on {result.backend}, autoreset {result.autoreset_mode}: {what} in {result.seconds:.1f} s"
