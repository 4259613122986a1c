"""The MinAtar games' state bounds: every state a game reaches lies inside them, and ``set_state``
refuses the rest (issue 36, class 1: a ball at x = 2**31 - 1 segfaulted the next step)."""

import numpy as np
import pytest

import kernelgym.envs as kge
from kernelgym.core import rng
from kernelgym.envs.spec import reference_reset

GAMES = ("Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders")


def _outside(state, bounds):
    """The names of the arrays of one env's ``state`` with a value outside ``bounds``."""
    return sorted(
        name
        for name, (low, high) in bounds.items()
        if (low is not None and np.any(state[name] < low)) or (high is not None and np.any(state[name] > high))
    )


@pytest.mark.parametrize("game", GAMES)
def test_every_state_a_reference_rollout_reaches_lies_inside_the_bounds(game):
    # bounds tighter than the game would refuse its own states (get_state -> set_state)
    spec = kge.get_spec(f"MinAtar-{game}-v0")
    params = spec.params
    bounds = spec.resolve(params).state_bounds
    reference = spec.load("reference")
    streams = rng.seed_streams(7, 1)
    actions = np.random.default_rng(0).integers(0, spec.resolve(params).action_space.n, 400)
    state = reference_reset(spec, reference.reset, params, streams)
    for action in actions:
        assert _outside(state, bounds) == []
        state, _, terminated = reference.step(params, state, action, streams)
        if terminated:
            assert _outside(state, bounds) == []
            state = reference_reset(spec, reference.reset, params, streams)


@pytest.fixture(scope="module")
def breakout():
    env = kge.make("MinAtar-Breakout-v1", 200, backend="cpu", seed=0)
    env.reset(seed=0)
    yield env
    env.close()


@pytest.mark.parametrize(
    "name, env, value, bound",
    [("ball_x", 0, 2**31 - 1, "<= 9"), ("ball_y", 0, 1000, "<= 9"), ("pos", 150, -1, ">= 0")],
)
def test_an_index_off_the_grid_is_refused_and_nothing_written(breakout, name, env, value, bound):
    before = breakout.get_state()
    state = breakout.get_state()
    state[name][env] = value
    with pytest.raises(ValueError, match=rf"state\['{name}'\] of env {env}: expected {bound} .*MinAtar-Breakout-v1"):
        breakout.set_state(state)
    after = breakout.get_state()
    for array in before:
        np.testing.assert_array_equal(after[array], before[array])
    breakout.step(np.zeros(200, np.int64))  # and the env steps on


def test_a_seaquest_table_row_is_bounded_per_field():
    spec = kge.get_spec("MinAtar-Seaquest-v0")
    low, high = spec.resolve(spec.params).state_bounds["subs"]
    assert low.shape == high.shape == (64, 5)
    assert high[0].tolist() == [10, 9, 1, 5, 11] and low[0].tolist() == [-1, 0, 0, 0, 0]
