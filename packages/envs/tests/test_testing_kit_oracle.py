"""The oracle behind the checks: exact reference transitions and start states, spaces."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgym.core import rng
from kernelgym.envs.testing import EnvHarness
from kit_fixtures import walk

PARAMS = walk.WalkParams()


@pytest.fixture(scope="module")
def harness():
    return EnvHarness(walk.SPEC, backend="cpu")


def _state(position, energy=0.0):
    return {"position": np.int32(position).reshape(()), "energy": np.float32(energy).reshape(())}


def _obs(state):
    return walk.reference_observe(PARAMS, state)


@settings(max_examples=40)
@given(
    position=st.integers(-PARAMS.goal + 1, PARAMS.goal - 1),
    energy=st.floats(0, 1, width=32),
    action=st.integers(0, 2),
    wrong=st.sampled_from(["position", "reward", "terminated", "obs", "none"]),
)
def test_step_problems_name_exactly_what_differs(harness, position, energy, action, wrong):
    prev = _state(position, energy)
    new_state, reward, terminated = walk.reference_step(PARAMS, prev, action)
    obs = _obs(new_state)
    if wrong == "position":
        new_state = dict(new_state, position=np.int32(new_state["position"] + 1).reshape(()))
        obs = _obs(new_state)
    elif wrong == "reward":
        reward += 1.0
    elif wrong == "terminated":
        terminated = not terminated
    elif wrong == "obs":
        obs = obs + 0.5
    row = rng.seed_streams(position + PARAMS.goal, 1)[0]
    problems = harness.step_problems(prev, np.array(action), row, new_state, obs, np.float32(reward), terminated)
    if wrong == "none":
        assert problems == []
    else:
        assert len(problems) == 1 and problems[0].startswith(
            {"position": "state 'position'", "reward": "reward", "terminated": "terminated", "obs": "observation"}[
                wrong
            ]
        )


def test_the_reference_must_not_modify_its_input(harness, monkeypatch):
    def mutating_step(params, state, action, generator=None):
        state["position"] = np.int32(-9).reshape(())
        return walk.reference_step(params, state, action)

    monkeypatch.setattr(harness, "reference", harness.reference._replace(step=mutating_step))
    with pytest.raises(AssertionError, match="modified its input"):
        harness.reference_step(_state(2), np.array(1), rng.seed_streams(0, 1)[0])


@settings(max_examples=30)
@given(seed=st.integers(0, 2**32 - 1), shift=st.integers(1, 3))
def test_start_states_must_be_exactly_the_reference_draw(harness, seed, shift):
    row = rng.seed_streams(seed, 1)[0]
    stream = row.reshape(1, 2).copy()
    start = walk.reference_reset(PARAMS, stream)  # what the env's stream gives
    assert harness.random_start
    assert harness.start_state_problems(start, row) == []
    assert harness.start_state_problems(start, row, rng_after=stream[0]) == []
    moved = _state(int(start["position"]) + shift)  # a legal start, but not this stream's
    assert "state 'position'" in harness.start_state_problems(moved, row)[0]
    assert (
        "is no start state: reference reset gives 0."
        in harness.start_state_problems(_state(int(start["position"]), energy=0.25), row)[0]
    )
    assert "drew a different number of values" in harness.start_state_problems(start, row, rng_after=row)[0]


def test_observations_outside_the_space_or_not_finite(harness):
    assert harness.space_problems(np.float32([0.5, 0.5]), np.float32(1.0)) == []
    assert "outside the observation space" in harness.space_problems(np.float32([1.5, 0.5]), np.float32(0))[0]
    assert "NaN or inf" in harness.space_problems(np.float32([np.nan, 0.5]), np.float32(0))[0]
    assert "reward" in harness.space_problems(np.float32([0.5, 0.5]), np.float32(np.inf))[0]


def test_invariant_problems_report_the_spec_invariant(harness):
    assert harness.invariant_problems(_state(1, 0.5)) == []
    assert "energy" in harness.invariant_problems(_state(1, 1.5))[0]
