"""The kit's refused steps follow the env's value check: at once ("sync") or at the next read ("deferred")."""

import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st

import kernelgym.envs as kge
from kernelgym.envs.testing import refusals
from kernelgym.envs.testing import strategies as kst
from kernelgym.envs.testing.strategies import InvalidAction

SPACES = [
    spaces.Discrete(5),
    spaces.Discrete(3, start=-1),
    spaces.MultiDiscrete([11, 4]),
    spaces.Box(-2.0, 2.0, shape=(1,), dtype=np.float32),
    spaces.Box(np.array([-1.0, 0.0], np.float32), np.array([np.inf, 1.0], np.float32)),
]


@settings(max_examples=60)
@given(data=st.data(), space=st.sampled_from(SPACES), count=st.integers(1, 6), agents=st.integers(1, 3))
def test_bad_positions_find_exactly_the_poked_value(data, space, count, agents):
    valid = data.draw(kst.batch_actions(space, count, agents))
    assert refusals.bad_positions(space, valid).size == 0
    bad = data.draw(kst.invalid_actions(space, count, agents))
    if not refusals.is_value_fault(bad):
        return
    positions = refusals.bad_positions(space, bad.actions)
    assert positions.size == 1
    # one env's actions keep the space's own trailing axes (MultiDiscrete's bounds broadcast over them)
    per_env = bad.actions.reshape(count, -1, *space.shape)
    envs = [index for index in range(count) if refusals.bad_positions(space, per_env[index]).size]
    assert refusals.bad_envs(space, bad.actions) == envs == [int(positions[0]) // per_env[0].size]


def cartpole(backend, mode):
    env = kge.make("CartPole-v1", 3, backend=backend, seed=0, check_action_values=mode)
    env.reset(seed=0)
    return env


OUT_OF_RANGE = InvalidAction("out_of_range", np.array([1, 7, 0]), ValueError)
SPACE = spaces.Discrete(2)


@pytest.mark.parametrize(
    "backend, mode", [("cpu", True), ("cpu", "deferred"), pytest.param("sim", "sync", marks=pytest.mark.sim)]
)
def test_a_sync_refusal_raises_in_the_step_and_steps_no_env(backend, mode):
    env = cartpole(backend, mode)
    assert refusals.refuse(env, OUT_OF_RANGE, SPACE) is None


@pytest.mark.sim
def test_a_deferred_refusal_reads_the_fault_within_the_call_and_returns_the_stepped_outputs():
    env, expected = cartpole("sim", True), cartpole("sim", "sync")
    result = refusals.step_result(env, refusals.refuse(env, OUT_OF_RANGE, SPACE))
    stepped = refusals.step_result(expected, expected.step(np.array([1, 0, 0])))
    assert result.differences(stepped, 0) == result.differences(stepped, 2) == []
    assert result.differences(stepped, 1)  # env 1 was not stepped
    env.check_actions()  # nothing is left to surface in a later rule


@pytest.mark.sim
@pytest.mark.parametrize(
    "mode, message",
    [
        (False, r"check_actions\(\) after step\(out_of_range actions\) raised nothing"),
        ("sync", r"step\(out_of_range actions\) raised ValueError in the step"),
    ],
)
def test_the_kit_catches_a_refusal_that_breaks_the_deferred_contract(mode, message):
    env = cartpole("sim", mode)
    # the kit reads the promise from the env: it promises "deferred", the built check does otherwise
    object.__setattr__(env, "check_action_values", "deferred")  # past the attribute guard: a lying env
    with pytest.raises(AssertionError, match=message):
        refusals.refuse(env, OUT_OF_RANGE, SPACE)


@pytest.mark.sim
def test_the_kit_catches_a_deferred_fault_left_by_an_earlier_step():
    env = cartpole("sim", True)
    env.step(np.array([5, 0, 0]))  # recorded, not read: it would surface in the next refusal
    with pytest.raises(AssertionError, match=r"does not name the bad index \(1,\)"):
        refusals.refuse(env, OUT_OF_RANGE, SPACE)
