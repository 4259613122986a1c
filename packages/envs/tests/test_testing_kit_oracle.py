"""The oracle behind the checks: reference transitions, start-state envelopes, spaces."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
@given(position=st.integers(-PARAMS.goal + 1, PARAMS.goal - 1), energy=st.floats(0, 1, width=32),
       action=st.integers(0, 2), wrong=st.sampled_from(["position", "reward", "terminated", "obs", "none"]))
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
    problems = harness.step_problems(prev, np.array(action), new_state, obs, np.float32(reward), terminated)
    if wrong == "none":
        assert problems == []
    else:
        assert len(problems) == 1 and problems[0].startswith({"position": "state 'position'", "reward": "reward",
                                                              "terminated": "terminated", "obs": "observation"}[wrong])


def test_the_reference_must_not_modify_its_input(harness, monkeypatch):
    def mutating_step(params, state, action, generator=None):
        state["position"] = np.int32(-9).reshape(())
        return walk.reference_step(params, state, action)

    monkeypatch.setattr(harness, "reference", harness.reference._replace(step=mutating_step))
    with pytest.raises(AssertionError, match="modified its input"):
        harness.reference_step(_state(2), np.array(1))


def test_start_states_must_lie_in_the_reference_envelope(harness):
    # the reference starts at a position in [-start_range, start_range], energy exactly 0
    assert harness.random_start
    assert harness.start_state_problems(_state(-PARAMS.start_range)) == []
    assert harness.start_state_problems(_state(PARAMS.start_range)) == []
    far = PARAMS.start_range * 2 + 1  # beyond the envelope widened by half its width
    assert "state 'position'" in harness.start_state_problems(_state(far))[0]
    assert "always 0." in harness.start_state_problems(_state(0, energy=0.25))[0]


def test_stochastic_steps_accept_any_outcome_the_reference_can_draw():
    harness = EnvHarness("GoRight-v0", backend="cpu", params={"slip": 0.3})
    prev = {"position": np.int32(3).reshape(())}

    def problems(position):
        state = {"position": np.int32(position).reshape(())}
        return harness.step_problems(prev, np.array(1), state, harness.reference_observe(state),
                                     np.float32(-harness.params.step_cost), False)

    assert problems(4) == [] and problems(2) == []  # moved right, or slipped left
    assert "state 'position' = 5" in problems(5)[0]  # no draw of the reference jumps two cells


def test_observations_outside_the_space_or_not_finite(harness):
    assert harness.space_problems(np.float32([0.5, 0.5]), np.float32(1.0)) == []
    assert "outside the observation space" in harness.space_problems(np.float32([1.5, 0.5]), np.float32(0))[0]
    assert "NaN or inf" in harness.space_problems(np.float32([np.nan, 0.5]), np.float32(0))[0]
    assert "reward" in harness.space_problems(np.float32([0.5, 0.5]), np.float32(np.inf))[0]


def test_invariant_problems_report_the_spec_invariant(harness):
    assert harness.invariant_problems(_state(1, 0.5)) == []
    assert "energy" in harness.invariant_problems(_state(1, 1.5))[0]
