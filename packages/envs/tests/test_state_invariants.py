"""``set_state`` refuses a state that breaks the spec's invariants (`EnvSpec.invariants`).

Issue 36: a state inside every array's bounds can still break a rule the env promises
(Tag's runners count, the walk's goal); the refusal names the env and the rule, and
nothing is written, as for the bounds.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kernelgym.envs as kge
from kernelgym.envs.vector_env import KernelVectorEnv
from kit_fixtures import walk

NUM_ENVS = 4
GOAL = walk.WalkParams().goal


@pytest.fixture(scope="module")
def walker():
    # the walk declares no bounds: its invariants are all that refuses a state
    env = KernelVectorEnv(walk.SPEC, NUM_ENVS, backend="cpu", seed=0)
    env.reset(seed=0)
    yield env
    env.close()


def _breaks(position, energy) -> bool:
    return abs(int(position)) > GOAL or not 0.0 <= float(energy) <= 1.0


positions = st.integers(-2 * GOAL, 2 * GOAL)
energies = st.floats(-0.5, 1.5, width=32)


@settings(max_examples=60, deadline=None)
@given(
    position=st.lists(positions, min_size=NUM_ENVS, max_size=NUM_ENVS),
    energy=st.lists(energies, min_size=NUM_ENVS, max_size=NUM_ENVS),
    index=st.none() | st.integers(0, NUM_ENVS - 1),
    names=st.sampled_from([("position", "energy"), ("position",), ("energy",)]),
)
def test_a_state_is_written_exactly_when_every_env_keeps_the_invariants(walker, position, energy, index, names):
    before = walker.get_state()
    given_values = {"position": np.array(position, np.int32), "energy": np.array(energy, np.float32)}
    # what each env would hold after the write: the arrays not given keep their values
    after_write = {name: given_values[name] if name in names else before[name] for name in before}
    envs = range(NUM_ENVS) if index is None else [index]
    broken = [env for env in envs if _breaks(after_write["position"][env], after_write["energy"][env])]
    state = {name: given_values[name] if index is None else given_values[name][index] for name in names}
    if broken:
        with pytest.raises(ValueError) as refused:
            walker.set_state(state, index=index)
        message = str(refused.value)
        assert f"state of env {broken[0]}: " in message, message
        assert "Walk-v0" in message and "nothing was written" in message, message
        assert "beyond the goal" in message or "outside [0, 1]" in message, message
        after = walker.get_state()
        for name in before:
            np.testing.assert_array_equal(after[name], before[name], err_msg=name)
    else:
        walker.set_state(state, index=index)
        after = walker.get_state()
        for name in before:
            written = np.arange(NUM_ENVS) == (np.arange(NUM_ENVS) if index is None else index)
            expected = np.where(written, after_write[name], before[name])
            np.testing.assert_array_equal(after[name], expected, err_msg=name)


def test_a_partial_write_is_checked_against_the_arrays_it_leaves(walker):
    walker.set_state({"position": np.int32(GOAL), "energy": np.float32(1.0)}, index=2)
    with pytest.raises(ValueError, match=r"state of env 2: .*position 5 beyond the goal; nothing was written"):
        walker.set_state({"position": np.int32(GOAL + 1)}, index=2)
    assert int(walker.get_state(2)["position"]) == GOAL


def test_an_unstarted_env_given_some_arrays_is_not_held_to_the_invariants_yet():
    # its other arrays are still the zeros it was made with; it steps only after a full write or a reset
    env = KernelVectorEnv(walk.SPEC, 2, backend="cpu", seed=0)
    try:
        env.set_state({"energy": np.float32(0.5)}, index=1)
        assert env.get_state(1)["energy"] == np.float32(0.5)
        with pytest.raises(ValueError, match=r"state of env 0: .*energy 2.0 outside \[0, 1\]"):
            env.set_state({"position": np.zeros(2, np.int32), "energy": np.array([2.0, 0.5], np.float32)})
    finally:
        env.close()


def test_a_tag_state_with_a_wrong_runners_count_is_refused_naming_the_env():
    env = kge.make("TagGridWorld-v0", 3, backend="cpu", seed=0)
    try:
        env.reset(seed=0)
        before = env.get_state()
        state = env.get_state()
        state["runners_left"][1] = state["runners_left"][1] - 1  # inside its bounds, wrong for in_game
        with pytest.raises(ValueError) as refused:
            env.set_state(state)
        message = str(refused.value)
        for part in ("state of env 1:", "TagGridWorld-v0", "runners are in the game", "nothing was written"):
            assert part in message, message
        after = env.get_state()
        for name in before:
            np.testing.assert_array_equal(after[name], before[name], err_msg=name)
    finally:
        env.close()


def test_check_invariants_false_writes_a_state_the_kernels_reached_as_it_is(walker):
    # the kit writes back states the kernels reached (a NaN energy, say) and reports broken
    # invariants itself; the bounds and dtype checks still apply
    state = {"position": np.zeros(NUM_ENVS, np.int32), "energy": np.full(NUM_ENVS, np.nan, np.float32)}
    with pytest.raises(ValueError, match="outside"):
        walker.set_state(state)
    walker.set_state(state, check_invariants=False)
    assert np.isnan(walker.get_state()["energy"]).all()
    with pytest.raises(TypeError, match=r"check_invariants: expected True or False, got 'no'"):
        walker.set_state(state, check_invariants="no")
    walker.set_state({"position": np.zeros(NUM_ENVS, np.int32), "energy": np.zeros(NUM_ENVS, np.float32)})
