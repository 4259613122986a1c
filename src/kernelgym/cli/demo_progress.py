"""The demo's progress bar: the mean return toward the target, the run's real stopping rule.

The demo stops at the first of three rules: the mean return of the last ``window``
episodes reaches the target (the one a run is meant to meet), the env-step budget, or the
time limit. So the bar fills with the mean return, not with env steps toward the budget
(which a run that learns never reaches: a bar to 3 M steps showed 10-13 minutes for a
300 k-step run). Env steps and env-steps/s are the secondary count, in the postfix.

The ETA is the earliest of the three rules' expected times: the return's recent trend
(its slope over the last `TREND_POINTS` updates) extended to the target, the remaining
budget at the current env-steps/s, and the time left. A return that does not rise gives
no trend estimate; the budget and the time limit still bound the ETA.
"""

from __future__ import annotations

import math
from collections import deque

from tqdm import tqdm

__all__ = ["ReturnProgress", "eta_seconds", "TREND_POINTS"]

TREND_POINTS = 10  # updates over which the return's slope is measured (a few seconds of training)
BAR_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| [{elapsed}{postfix}]"


def eta_seconds(
    times: list[float],
    returns: list[float],
    target: float,
    steps_left: float,
    steps_per_s: float,
    time_left: float,
) -> float:
    """Seconds until the first stopping rule is expected to stop the run.

    Parameters
    ----------
    times, returns : list of float
        The recent updates' elapsed seconds (increasing) and mean returns, oldest first.
    target : float
        The mean return that stops the run.
    steps_left, steps_per_s : float
        Env steps left in the budget, and the current env-steps/s.
    time_left : float
        Seconds left before the time limit.

    Returns
    -------
    float
        The earliest of: the return's trend reaching ``target``, the budget at
        ``steps_per_s`` and ``time_left``; never negative.
    """
    bounds = [time_left]
    if steps_per_s > 0:
        bounds.append(steps_left / steps_per_s)
    if returns and returns[-1] >= target:
        bounds.append(0.0)
    elif len(times) >= 2 and times[-1] > times[0]:
        slope = (returns[-1] - returns[0]) / (times[-1] - times[0])
        if slope > 0:
            bounds.append((target - returns[-1]) / slope)
    return max(0.0, min(bounds))


class ReturnProgress:
    """A tqdm bar filled by the mean return toward ``target`` (see the module docstring).

    Parameters
    ----------
    target : float
        The mean return that stops the run (the bar's total).
    window : int
        How many episodes the mean is over; until that many have finished the run cannot
        stop on the return, and the postfix counts them.
    max_env_steps : int
        The env-step budget.
    time_limit_s : float
        The time limit.
    **bar_options
        Passed to tqdm (``desc``, ``disable``, ``file``).
    """

    def __init__(self, target: float, window: int, max_env_steps: int, time_limit_s: float, **bar_options):
        self.target = float(target)
        self.window = window
        self.max_env_steps = max_env_steps
        self.time_limit_s = time_limit_s
        self.value = 0.0  # the mean return shown, within [0, target], to 0.1 (rounded down)
        self.eta_s = math.inf
        self._times: deque[float] = deque(maxlen=TREND_POINTS)
        self._returns: deque[float] = deque(maxlen=TREND_POINTS)
        # smoothing=0: tqdm's own rate is n over the elapsed time, never a falling return's negative one
        self.bar = tqdm(total=self.target, bar_format=BAR_FORMAT, smoothing=0, **bar_options)

    def update(self, mean_return: float, episodes: int, env_steps: int, elapsed_s: float) -> None:
        """Show the mean return of the last ``episodes`` (at most ``window``) after ``env_steps``
        env steps and ``elapsed_s`` seconds of training."""
        self._times.append(elapsed_s)
        self._returns.append(mean_return)
        steps_per_s = env_steps / elapsed_s if elapsed_s > 0 else 0.0
        self.eta_s = eta_seconds(
            list(self._times),
            list(self._returns),
            self.target,
            max(0, self.max_env_steps - env_steps),
            steps_per_s,
            max(0.0, self.time_limit_s - elapsed_s),
        )
        # shown to 0.1, rounded down: tqdm derives an (unshown) ETA of its own from n, which a
        # denormal n would make infinite, and the bar is full only at the target itself
        shown = math.floor(min(max(mean_return, 0.0), self.target) * 10) / 10
        self._show(shown, mean_return, episodes, env_steps, steps_per_s)

    def finish(self, reached_target: bool) -> None:
        """Close the bar; full when the run stopped on the target."""
        if reached_target:
            self.eta_s = 0.0
            self.value = self.target
            self.bar.n = self.target
            self.bar.refresh()
        self.bar.close()

    def _show(self, value, mean_return, episodes, env_steps, steps_per_s) -> None:
        self.value = value
        self.bar.n = value  # the mean return can fall: set, not added to
        window = "" if episodes >= self.window else f" ({episodes}/{self.window} episodes)"
        self.bar.set_postfix_str(
            f"return {mean_return:.1f}/{self.target:g}{window}, ETA {_clock(self.eta_s)}, "
            f"{tqdm.format_sizeof(env_steps)} steps, {tqdm.format_sizeof(steps_per_s)} steps/s"
        )


def _clock(seconds: float) -> str:
    """``m:ss`` (``h:mm:ss`` from an hour), or ``?`` for no estimate."""
    if not math.isfinite(seconds):
        return "?"
    return tqdm.format_interval(seconds)
