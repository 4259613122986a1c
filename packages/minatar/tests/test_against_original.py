"""Every game against the original ``minatar`` 1.0.15, transition by transition.

The original is a test-only dependency (tox's ``minatar`` env installs it with
``--no-deps``); it draws from a stand-in that returns kernelgym's draws in order
(`kernelgym.minatar.side_by_side`). Hypothesis picks seeds, env counts, options and
action sequences; every observation, reward and terminal flag must be identical.
``benchmarks/minatar_side_by_side.py`` runs the long version (>= 10,000 steps a game).
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgym.minatar.side_by_side import GAMES, StreamDraws, compare

pytest.importorskip("minatar", reason="the original minatar package (tox -e minatar installs it)")

ACTION_COUNTS = {"Asterix": (5, 6), "Breakout": (3, 6), "Freeway": (3, 6), "Seaquest": (6, 6), "SpaceInvaders": (4, 6)}


# The options are compile-time params: each set is one more build of every game's kernels, so
# CI runs two sets (the defaults, and every option changed); the long script runs four.
OPTION_SETS = {"defaults": (0.1, True, True), "changed": (0.5, False, False)}


@pytest.mark.parametrize("options", sorted(OPTION_SETS))
@pytest.mark.parametrize("game", sorted(ACTION_COUNTS))
@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), num_envs=st.integers(1, 4), steps=st.integers(1, 300), data=st.data())
def test_identical_to_the_original(game, options, seed, num_envs, steps, data):
    sticky_action_prob, difficulty_ramping, minimal_action_set = OPTION_SETS[options]
    count = ACTION_COUNTS[game][0 if minimal_action_set else 1]
    action_seed = data.draw(st.integers(0, 2**32 - 1), label="action_seed")
    actions = np.random.default_rng(action_seed).integers(0, count, (steps, num_envs))
    mismatch, counts = compare(
        game,
        actions,
        seed,
        sticky_action_prob=sticky_action_prob,
        difficulty_ramping=difficulty_ramping,
        minimal_action_set=minimal_action_set,
    )
    assert mismatch is None, str(mismatch)
    assert counts["transitions"] + counts["episodes"] == steps * num_envs


@pytest.mark.parametrize("game", sorted(ACTION_COUNTS))
def test_the_comparison_sees_a_different_stream(game):
    # other draws than kernelgym's must show up as a mismatch, or the comparison proves nothing
    actions = np.random.default_rng(0).integers(0, ACTION_COUNTS[game][0], (300, 4))
    mismatch, _ = compare(game, actions, seed=1, original_seed=2)
    assert mismatch is not None


def test_stream_draws_follow_kernelgym_streams():
    from kernelgym.core import rng

    streams = rng.seed_streams(5, 1)
    draws = StreamDraws(streams[0])
    expected = streams.copy()
    assert draws.rand() == rng.uniform(expected, 0)
    assert draws.randint(1, 9) == 1 + rng.randint(expected, 0, 8)
    assert draws.rand(3).tolist() == [rng.uniform(expected, 0) for _ in range(3)]
    assert draws.randint(1, 6, 8).tolist() == [1 + rng.randint(expected, 0, 5) for _ in range(8)]
    assert draws.draws == 13
    assert sorted(GAMES) == ["Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders"]
