"""The long horizon's replays in blocks (`kernelgym.envs.testing.replays`): forked or not, any
block length, they find what one pass over the steps finds, and a reference that raises in a
forked block raises as in one process."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgym.envs.spec import CPUReference
from kernelgym.envs.testing import check_env, long_horizon, replays
from kernelgym.envs.testing.child_process import fork_refusal
from kernelgym.envs.testing.harness import EnvHarness, env_slice, flat_obs
from kit_fixtures import rare_walk

SEED = 20261129
NAN = "NaN or inf in its observation, reward or state"
# planted bugs that fail at a step each draw decides: a gust pushing the wrong way (a replay
# differs from the reference), a leak whose gauge goes NaN (this process's finite check)
FIXTURES = {
    "gust": (rare_walk.GUST, ({"gust_probability": 0.002}, {"gust_probability": 0.02}, {"gust_probability": 0.0})),
    "leak": (rare_walk.FUEL, ({"leak": 0.02, "leaky_share": 0.1}, {"leak": 0.1, "leaky_share": 0.3})),
}
_harnesses: dict = {}


def _harness(fixture: str, params: int) -> EnvHarness:
    key = (fixture, params)
    if key not in _harnesses:
        spec, choices = FIXTURES[fixture]
        _harnesses[key] = EnvHarness(spec, "cpu", params=choices[params])
    return _harnesses[key]


def _one_pass(harness, env, seed, steps, sample):
    """The model: each step, every check over every env (non-finite values, the sampled envs'
    replays, the invariants), stopping at the first step where an env fails."""
    actions_source = long_horizon._Actions(harness, env.num_envs, seed)
    prev, streams = env.get_state(), env.get_rng_states()
    pending = np.zeros(env.num_envs, bool)
    for step in range(1, steps + 1):
        actions = actions_source.next()
        obs, rewards, terminated, truncated, _ = env.step(actions, numpy=True)
        obs = flat_obs(harness.observation_space, obs)
        state, rng_after = env.get_state(), env.get_rng_states()
        failing = {}
        for index in long_horizon._nonfinite_envs(obs, rewards, state):
            failing.setdefault(int(index), []).append(NAN)
        for index in sample:
            found = replays.reference_problems(
                harness, prev, streams, actions, obs, rewards, terminated, state, rng_after, pending, int(index)
            )
            if found:
                failing.setdefault(int(index), []).extend(found)
        if step % long_horizon.INVARIANTS_EVERY == 0 or step == steps:
            for index in range(env.num_envs):
                found = harness.invariant_problems(env_slice(state, index))
                if found:
                    failing.setdefault(index, []).extend(found)
        if failing:
            first = min(failing)
            return long_horizon._Failure(step, first, failing[first])
        prev, streams, pending = state, rng_after, terminated | truncated
    return None


@settings(max_examples=16, deadline=None)
@given(
    fixture=st.sampled_from(sorted(FIXTURES)),
    params=st.integers(0, 2),
    num_envs=st.integers(2, 40),
    steps=st.integers(1, 160),
    blocks=st.integers(1, 9),
    forked=st.booleans(),
    # bytes of recorded steps past which the blocks are replayed here (None: the default)
    memory_cap=st.sampled_from([None, 1, 4096]),
    seed=st.integers(0, 2**16),
)
def test_blocks_find_what_one_pass_finds(fixture, params, num_envs, steps, blocks, forked, memory_cap, seed):
    harness = _harness(fixture, params % len(FIXTURES[fixture][1]))
    sample = long_horizon._sample(num_envs, min(num_envs, 6), seed)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(replays, "REPLAY_BLOCKS", blocks)
        if memory_cap is not None:
            patch.setattr(long_horizon, "MAX_FORKED_BYTES", memory_cap)
        if not forked:
            patch.setattr(long_horizon, "fork_refusal", lambda: "refused by the test")
        env = harness.make_env(num_envs, seed, fresh=True)
        found = long_horizon._run(harness, env, seed, steps, sample)
        env.close()
    env = harness.make_env(num_envs, seed, fresh=True)
    expected = _one_pass(harness, env, seed, steps, sample)
    env.close()
    assert found == expected


def test_the_planted_bugs_fail_where_one_pass_says_in_blocks_forked_and_here(monkeypatch):
    # the property above could pass on draws that never fail: these do, each found one way
    for fixture, params, reason in (("gust", 1, "state 'position'"), ("leak", 1, NAN)):
        harness = _harness(fixture, params)
        sample = long_horizon._sample(32, 8, SEED)
        env = harness.make_env(32, SEED, fresh=True)
        expected = _one_pass(harness, env, SEED, 200, sample)
        env.close()
        assert expected is not None and any(reason in problem for problem in expected.problems), expected
        for refusal in (fork_refusal, lambda: "refused by the test"):
            monkeypatch.setattr(long_horizon, "fork_refusal", refusal)
            env = harness.make_env(32, SEED, fresh=True)
            assert long_horizon._run(harness, env, SEED, 200, sample) == expected
            env.close()


def _raising_step(params, state, action, rng_states):
    if abs(int(state["position"])) == params.limit:
        raise ValueError(f"planted: the walker reached {int(state['position'])}")
    return rare_walk.gust_reference_step(params, state, action, rng_states)


RAISING = dataclasses.replace(
    rare_walk.GUST_NO_RANGE,
    id="GustWalkRaising-v0",
    reference=CPUReference(rare_walk.gust_reference_reset, _raising_step, rare_walk.gust_reference_observe),
)


@pytest.mark.parametrize("blocks", [4, 40])
def test_a_reference_that_raises_in_a_forked_block_raises_as_in_one_process(monkeypatch, blocks):
    monkeypatch.setattr(replays, "REPLAY_BLOCKS", blocks)
    forked = check_env(RAISING, backend="cpu", max_examples=2, seed=SEED, checks=["long_horizon"])["long_horizon"]
    monkeypatch.setattr(long_horizon, "fork_refusal", lambda: "refused by the test")
    here = check_env(RAISING, backend="cpu", max_examples=2, seed=SEED, checks=["long_horizon"])["long_horizon"]
    assert forked.status == here.status == "error", (forked.message, here.message)
    assert "ValueError: planted: the walker reached" in forked.message
    assert forked.message == here.message
