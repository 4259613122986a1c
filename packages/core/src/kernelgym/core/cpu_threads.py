"""How a ``cpu`` launch uses threads: one, all of numba's, or the faster of the two, timed.

Every cpu program has two builds of one source with the same results: a ``prange`` loop
that numba spreads over its thread team, and a serial twin that runs in the calling
thread. On an idle machine the team wins at a few thousand envs; as soon as another
process is busy, it loses badly (numba's default ``omp`` layer spins at barriers, and a
team member that the scheduler parks stalls the whole launch): 5-65x below one thread,
measured on 2 cores (BENCHMARKS.md, "CPU threads under contention").

The strategy is read from ``KERNELGYM_CPU_THREADS`` when a launch is bound:

``adaptive`` (default)
    Time the launch; every so often try the other build for a few launches and keep the
    faster (`AdaptiveLaunch`). Tries back off while they lose, so a losing build costs
    about 1% of the time.
``all``
    Always the thread team (numba's thread count of the calling thread), as before.
``one``
    Always the serial twin in the calling thread; the team's build is never compiled.

Numba's own knobs still apply: ``NUMBA_NUM_THREADS`` or ``numba.set_num_threads`` set
what "all" means, and ``NUMBA_THREADING_LAYER`` the layer. Worker processes that
kernelgym starts divide the cores between them
(``kernelgym.collectors.processes.share_cores``).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import time

import numba

__all__ = [
    "CPU_THREADS_ENV_VAR",
    "STRATEGIES",
    "AdaptiveLaunch",
    "adaptive_counts",
    "cpu_threads_strategy",
    "cpu_threads_override",
    "describe",
    "team_allowed",
    "usable_cpus",
]

CPU_THREADS_ENV_VAR = "KERNELGYM_CPU_THREADS"
STRATEGIES = ("adaptive", "all", "one")

# Seconds between tries of the other build: FIRST_GAP_S, doubled by each losing try up to
# MAX_BACKOFF times, and never less than the time a losing try wasted over TRY_SHARE (so
# that tries of a collapsed thread team cost about 1% of the time), at most MAX_GAP_S.
# A try runs up to TRY_CALLS launches and times all but the first (which pays the team's
# wake-up, or the cache refill after the other build); it loses at once when one launch
# takes more than GIVE_UP times the current build's mean.
FIRST_GAP_S = 0.05
# The first try compiles the serial twin (about as long as the team's own compile, seconds on
# a busy machine): it waits until the team's launches have taken this long, so that short
# runs (tests, a quick look at an env) never pay for a twin they could not profit from.
TWIN_AFTER_S = 1.0
MAX_BACKOFF = 64
TRY_SHARE = 0.01
MAX_GAP_S = 30.0
TRY_CALLS = 3
GIVE_UP = 8.0
# the other build must be this much faster to take over: timings are noisy under load
SWITCH_MARGIN = 0.9

# launches run by every AdaptiveLaunch of this process: [serial twin, thread team]
_COUNTS = [0, 0]
# set by `cpu_threads_override` (the testing kit's builds), read before the environment variable
_OVERRIDE: contextvars.ContextVar[str | None] = contextvars.ContextVar("kernelgym_cpu_threads", default=None)


@contextlib.contextmanager
def cpu_threads_override(value: str):
    """Bind cpu launches with the strategy ``value`` while the block runs, whatever
    ``KERNELGYM_CPU_THREADS`` says.

    For tools that run launches on one thread anyway (the testing kit): with ``"one"`` they
    compile the serial twin only, never the thread team's build.

    Raises
    ------
    ValueError
        ``value`` is not one of `STRATEGIES`.
    """
    token = _OVERRIDE.set(cpu_threads_strategy(value))
    try:
        yield
    finally:
        _OVERRIDE.reset(token)


def cpu_threads_strategy(value: str | None = None) -> str:
    """The threading strategy of cpu launches.

    Parameters
    ----------
    value : {"adaptive", "all", "one"} or None
        ``None`` reads `cpu_threads_override`'s value where one is set, else
        ``KERNELGYM_CPU_THREADS`` (``"adaptive"`` when unset or empty).
        Case and surrounding spaces are ignored.

    Returns
    -------
    str
        One of `STRATEGIES`.

    Raises
    ------
    ValueError
        The value is not a strategy name.
    """
    source = "cpu threads strategy"
    override = _OVERRIDE.get()
    if value is None and override is not None:
        return override
    if value is None:
        value = os.environ.get(CPU_THREADS_ENV_VAR) or "adaptive"
        source = f"{CPU_THREADS_ENV_VAR} environment variable"
    if not isinstance(value, str):
        raise TypeError(f"{source}: expected a str, one of {STRATEGIES}, got {type(value).__name__} {value!r}")
    key = value.strip().lower()
    if key not in STRATEGIES:
        raise ValueError(f"{source}: expected one of {STRATEGIES}, got {value!r}")
    return key


def team_allowed(value: str | None = None) -> bool:
    """Whether a cpu launch may run numba's thread team: not with the ``one`` strategy, nor
    with one numba thread (``NUMBA_NUM_THREADS=1``). Where it may not, binding compiles the
    serial twin only."""
    return cpu_threads_strategy(value) != "one" and numba.config.NUMBA_NUM_THREADS > 1


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class AdaptiveLaunch:
    """A cpu launch that runs the faster of its thread-team build and its serial twin.

    Both builds compute the same results; only the time differs. It times each launch
    (inside the compiled call, not the caller's work between launches), and after each gap
    runs the caller's next `TRY_CALLS` launches in the other build: that build takes over
    when its mean is below `SWITCH_MARGIN` times the current build's mean since the last
    try, and loses at once when one of its launches takes `GIVE_UP` times that mean. A
    losing try doubles the gap (up to `MAX_BACKOFF` times `FIRST_GAP_S`, and at least the
    time it wasted over `TRY_SHARE`); a switch resets it. The serial twin is compiled at
    the first try, not at bind. When the calling thread has one numba thread, it stays
    serial. Concurrent callers may skew its timings, never its results.

    Attributes
    ----------
    func : numba dispatcher
        The thread-team launcher (as ``functools.partial.func``).
    args : tuple
        The arguments bound before the per-call values (as ``functools.partial.args``).
    serial : numba dispatcher
        The serial twin.
    """

    __slots__ = (
        "func",
        "args",
        "serial",
        "_parallel",
        "_spent",
        "_counted",
        "_home_mean",
        "_trying",
        "_try_spent",
        "_wasted",
        "_try_at",
        "_backoff",
    )

    def __init__(self, parallel, serial, args: tuple):
        self.func = parallel
        self.serial = serial
        self.args = tuple(args)
        self._parallel = True  # the team first: fastest on an idle machine
        self._spent = 0.0
        self._counted = 0
        self._home_mean = 0.0
        self._trying = 0  # launches of the current try still to run (0: not trying)
        self._try_spent = 0.0
        self._wasted = 0.0  # launch time a try took beyond what the current build would have
        self._backoff = 1
        self._try_at: float | None = None  # set by the first launch: binding is not launching

    @property
    def parallel(self) -> bool:
        """Whether launches run the thread team now (else the serial twin)."""
        return self._parallel

    def __call__(self, *per_call):
        # a try runs the caller's own next launches in the other build: a launch steps
        # envs, so it cannot be repeated just to time it
        start = time.perf_counter()
        result = (self.func if self._parallel else self.serial)(*self.args, *per_call)
        end = time.perf_counter()
        _COUNTS[self._parallel] += 1
        if self._try_at is None:
            self._try_at = end + FIRST_GAP_S  # the first launch fills caches: not counted
        elif self._trying:
            self._trying -= 1
            took = end - start
            self._wasted += took - self._home_mean
            if self._trying < TRY_CALLS - 1:
                self._try_spent += took
            if took > GIVE_UP * self._home_mean:
                self._decide(end, won=False)
            elif not self._trying:
                self._decide(end, won=self._try_spent / (TRY_CALLS - 1) < SWITCH_MARGIN * self._home_mean)
        else:
            self._spent += end - start
            self._counted += 1
            if end >= self._try_at and (self._spent >= TWIN_AFTER_S or self._twin_ready()):
                self._begin_try(end)
        return result

    def _twin_ready(self) -> bool:
        return len(self.serial.signatures) >= len(self.func.signatures)

    def _begin_try(self, now: float) -> None:
        if not self._parallel and numba.get_num_threads() == 1:
            # one thread for this caller (a worker's share, numba.set_num_threads(1)): no team
            self._try_at = now + FIRST_GAP_S * MAX_BACKOFF
            return
        if self._parallel and not self._twin_ready():
            # the twin's first call would compile (or load) it inside the timed try
            for signature in self.func.signatures:
                self.serial.compile(signature)
        self._home_mean = self._spent / self._counted
        self._parallel = not self._parallel
        self._trying = TRY_CALLS
        self._try_spent = 0.0
        self._wasted = 0.0

    def _decide(self, now: float, won: bool) -> None:
        self._trying = 0
        if won:
            self._backoff = 1  # keep the other build, and look again soon
            gap = FIRST_GAP_S
        else:
            self._parallel = not self._parallel
            self._backoff = min(2 * self._backoff, MAX_BACKOFF)
            gap = max(FIRST_GAP_S * self._backoff, min(self._wasted / TRY_SHARE, MAX_GAP_S))
        self._spent = 0.0
        self._counted = 0
        self._try_at = now + gap

    def __repr__(self):
        return f"<AdaptiveLaunch now {'thread team' if self._parallel else 'serial'}>"


def adaptive_counts() -> tuple[int, int]:
    """How many adaptive launches ran the serial twin and the thread team in this process
    so far: ``(serial, team)``."""
    return _COUNTS[0], _COUNTS[1]


def describe() -> str:
    """One line naming the strategy cpu launches bound now would use, and numba's threads."""
    strategy = cpu_threads_strategy()
    threads = numba.get_num_threads()
    try:
        layer = numba.threading_layer()
    except ValueError:  # no parallel launch yet: the layer numba will load
        layer = f"{numba.config.THREADING_LAYER} (not loaded yet)"
    what = {
        "adaptive": f"the faster of 1 and {threads} threads per launch, timed",
        "all": f"{threads} threads per launch",
        "one": "1 thread per launch",
    }[strategy]
    return f"{CPU_THREADS_ENV_VAR}={strategy}: {what}; numba layer {layer}"
