"""The demo's progress bar follows its stopping rule: the mean return toward the target, not env steps.

Nothing here is timed: elapsed seconds are given to the bar, as the training loop measures them.
"""

import io

from hypothesis import given
from hypothesis import strategies as st

from kernelgym.cli.demo_progress import ReturnProgress, eta_seconds

returns = st.floats(-1e3, 1e3, allow_nan=False)
# (mean return, seconds since the last update, env steps in it): one training iteration each
iterations = st.lists(st.tuples(returns, st.floats(0.01, 30.0), st.integers(1, 10**5)), min_size=1, max_size=30)


def progress(target=475.0, window=100, max_env_steps=3_000_000, time_limit_s=300.0):
    out = io.StringIO()
    bar = ReturnProgress(target, window, max_env_steps, time_limit_s, file=out, mininterval=0, desc="PPO")
    return bar, out


@given(iterations, st.floats(1.0, 1e3))
def test_the_bar_counts_the_mean_return_toward_the_target_and_the_eta_respects_every_stop(steps, target):
    bar, _ = progress(target=target, time_limit_s=300.0)
    elapsed, env_steps = 0.0, 0
    for mean_return, seconds, new_steps in steps:
        elapsed += seconds
        env_steps += new_steps
        bar.update(mean_return, 100, env_steps, elapsed)
        assert bar.bar.total == target  # the bar's unit is the return, its total the target
        shown = min(max(mean_return, 0.0), target)
        assert bar.bar.n == bar.value and shown - 0.1 <= bar.value <= shown
        # the run stops at the time limit or the step budget at the latest
        assert 0.0 <= bar.eta_s <= max(0.0, 300.0 - elapsed)
        assert bar.eta_s <= max(0, 3_000_000 - env_steps) / (env_steps / elapsed)
        if mean_return >= target:
            assert bar.eta_s == 0.0
    bar.finish(reached_target=False)


def test_it_finishes_full_at_the_target_and_says_so():
    bar, out = progress()
    bar.update(120.0, 40, 65_536, 10.0)
    assert "return 120.0/475 (40/100 episodes)" in out.getvalue()
    assert "65.5k steps" in out.getvalue()
    bar.update(480.0, 100, 131_072, 20.0)
    bar.finish(reached_target=True)
    assert bar.bar.n == bar.bar.total == 475.0
    assert out.getvalue().splitlines()[-1].startswith("PPO: 100%")
    assert "3.0M" not in out.getvalue() and "3000000" not in out.getvalue()  # not the step budget's bar


def test_a_run_stopped_by_its_budget_is_not_shown_full():
    bar, out = progress()
    bar.update(200.0, 100, 3_000_000, 100.0)
    bar.finish(reached_target=False)
    assert bar.bar.n == 200.0 and "100%" not in out.getvalue()


def test_the_eta_extends_a_rising_return_to_the_target():
    # 10 more return a second, 100 short of the target: 10 s, sooner than the budget or the time limit
    assert eta_seconds([0.0, 5.0], [300.0, 350.0], 450.0, 10**9, 1e4, 1e3) == 10.0
    # a return that does not rise gives no trend: the time limit (or the budget) bounds the ETA
    assert eta_seconds([0.0, 5.0], [300.0, 290.0], 450.0, 10**9, 1e4, 120.0) == 120.0
    assert eta_seconds([0.0, 5.0], [300.0, 290.0], 450.0, 5e5, 1e4, 120.0) == 50.0
