"""Batched spaces: gymnasium's batch_space, with bounds that never grow with the batch."""

import copy
import pickle

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import batch_space
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgym.envs.runtime.batched_spaces import BroadcastBox, batch

SHAPES = st.lists(st.integers(1, 3), min_size=0, max_size=2).map(tuple)
BOUNDS = st.sampled_from([(-np.inf, np.inf), (-1.0, 1.0), (0.0, np.inf), (-np.inf, 2.5)])
SINGLE = st.one_of(
    st.builds(lambda bounds, shape: spaces.Box(*bounds, shape=shape or (1,), dtype=np.float32), BOUNDS, SHAPES),
    st.builds(lambda n, start: spaces.Discrete(n, start=start), st.integers(1, 5), st.integers(-2, 2)),
    st.builds(lambda nvec: spaces.MultiDiscrete(nvec), st.lists(st.integers(1, 6), min_size=1, max_size=3)),
    st.builds(lambda n: spaces.MultiBinary(n), st.integers(1, 4)),
)
SPACES = st.one_of(SINGLE, st.builds(lambda a, b: spaces.Dict({"a": a, "b": b}), SINGLE, SINGLE))
COUNTS = st.lists(st.integers(1, 4), min_size=1, max_size=2)


def gymnasium_batch(space, counts):
    for count in counts:
        space = batch_space(space, count)
    return space


def leaves(space):
    return (
        [leaf for sub in space.spaces.values() for leaf in leaves(sub)] if isinstance(space, spaces.Dict) else [space]
    )


def same_sample(x, y):
    if isinstance(x, dict):
        return x.keys() == y.keys() and all(same_sample(x[k], y[k]) for k in x)
    return np.array_equal(x, y) and np.asarray(x).dtype == np.asarray(y).dtype


@given(SPACES, COUNTS, st.integers(0, 2**16))
@settings(max_examples=60, deadline=None)
def test_batch_equals_gymnasiums_batch_space_with_broadcast_bounds(space, counts, seed):
    expected, got = gymnasium_batch(space, counts), batch(space, counts)
    assert type(got) is type(expected) or (isinstance(got, BroadcastBox) and type(expected) is spaces.Box)
    assert got == expected and expected == got and got.shape == expected.shape
    expected.seed(seed)
    got.seed(seed)
    samples = [expected.sample() for _ in range(3)]
    assert all(same_sample(x, got.sample()) for x in samples), "same sampler, same draws"
    assert all(got.contains(x) for x in samples)
    for leaf in leaves(got):
        if isinstance(leaf, spaces.Box):
            for bound in (leaf.low, leaf.high, leaf.bounded_below, leaf.bounded_above):
                assert bound.strides[0] == 0, "the batch axis is a broadcast, not a copy"
    for clone in (copy.deepcopy(got), pickle.loads(pickle.dumps(got))):
        assert clone == expected


def test_a_huge_batch_costs_one_envs_bounds():
    space = batch(spaces.Box(-np.inf, np.inf, (7001,), np.float32), (1000, 2000))
    assert space.shape == (2000, 1000, 7001)
    assert len(pickle.dumps(space)) < 200_000  # one env's bounds, not 14 G elements
    assert not space.is_bounded() and repr(space) == "Box(-inf, inf, (2000, 1000, 7001), float32)"
