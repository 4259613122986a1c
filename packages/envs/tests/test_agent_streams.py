"""Agent-layout envs have one RNG stream per (env, agent), seeded from the env seed; env-layout envs one per env."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kernelgym.envs as kge
from kernelgym.core import rng
from kernelgym.envs.runtime.streams import stream_table
from kernelgym.envs.tag.continuous import REFERENCE, TagContinuousParams


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32), num_envs=st.integers(1, 5), num_taggers=st.integers(1, 3))
def test_agent_layout_streams_are_seeded_per_env_and_agent(seed, num_envs, num_taggers):
    env = kge.make(
        "TagGridWorld-v0", num_envs=num_envs, backend="cpu", seed=seed + 1, num_taggers=num_taggers, num_runners=2
    )
    env.reset(seed=seed)  # TagGridWorld draws nothing: the streams stay as seeded
    streams = env.get_rng_states()
    np.testing.assert_array_equal(streams, rng.seed_agent_streams(seed, num_envs, num_taggers + 2))
    np.testing.assert_array_equal(env.get_rng_states(num_envs - 1), streams[num_envs - 1])


def test_env_layout_streams_stay_one_per_env():
    env = kge.make("CartPole-v1", num_envs=3, backend="cpu", seed=4)
    assert env.get_rng_states().shape == (3, 2) and env.get_rng_states(1).shape == (2,)


def test_set_rng_states_takes_the_agent_streams_and_names_the_expected_shape():
    env = kge.make("TagGridWorld-v0", num_envs=2, backend="cpu", seed=0, num_taggers=2, num_runners=1)
    fresh = rng.seed_agent_streams(9, 2, 3)
    env.set_rng_states(fresh[1], index=0)
    np.testing.assert_array_equal(env.get_rng_states(0), fresh[1])
    env.set_rng_states(fresh)
    np.testing.assert_array_equal(env.get_rng_states(), fresh)
    with pytest.raises(ValueError, match=r"states: expected uint64 of shape \(2, 3, 2\), got uint64 \(2, 2\)"):
        env.set_rng_states(rng.seed_streams(0, 2))
    with pytest.raises(ValueError, match=r"expected uint64 of shape \(3, 2\)"):
        env.set_rng_states(fresh[0, 0], index=1)


@settings(max_examples=10, deadline=None)
# two runner counts: each one is a build of its own (tens of seconds), and the streams are per agent either way
@given(seed=st.integers(0, 2**32), num_envs=st.integers(1, 4), num_runners=st.sampled_from([1, 3]))
def test_every_tag_continuous_agent_draws_its_start_from_its_own_stream(seed, num_envs, num_runners):
    params = TagContinuousParams(num_taggers=2, num_runners=num_runners)
    env = kge.make(
        "TagContinuous-v0", num_envs=num_envs, backend="cpu", seed=seed, num_taggers=2, num_runners=num_runners
    )
    env.reset(seed=seed)
    seeded = rng.seed_agent_streams(seed, num_envs, params.num_agents)
    after = env.get_rng_states()
    # every agent drew (its row moved on), each exactly what its own start takes from its own row
    assert np.all(np.any(after != seeded, axis=-1))
    state = env.get_state()
    for index in range(num_envs):
        streams = seeded[index].copy()
        start = REFERENCE.reset(params, streams)
        np.testing.assert_array_equal(after[index], streams)
        for name in ("loc_x", "loc_y", "direction"):
            np.testing.assert_array_equal(state[name][index], start[name])


def test_the_reference_refuses_streams_that_are_not_its_agents():
    params = TagContinuousParams(num_taggers=1, num_runners=2)
    with pytest.raises(
        ValueError,
        match=r"rng_states: expected the env's 3 agent streams, shape \(3, 2\), "
        r"got shape \(1, 2\)",
    ):
        REFERENCE.reset(params, rng.seed_streams(0, 1))


def test_kernels_bind_the_agent_streams_as_a_flat_table_of_the_same_memory():
    streams = rng.seed_agent_streams(1, 3, 4)
    table = stream_table(streams)
    assert table.shape == (12, 2) and np.shares_memory(table, streams)
    np.testing.assert_array_equal(table[2 * 4 + 3], streams[2, 3])  # rng.agent_stream(2, 3, 4) == 11
    assert stream_table(table) is table  # one stream per env: as it is
    with pytest.raises(ValueError):
        stream_table(np.zeros((6, 3, 2), np.uint64)[::2])  # not viewable flat: never a silent copy
