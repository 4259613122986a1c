"""The kit finds a NaN or inf an env's kernel makes and names the kernel's own line.

A division by zero gives inf/NaN on a GPU, silently, and now on the cpu and sim twins
too (the cpu serial launcher raised ZeroDivisionError from binding.py before). The
fixtures are in kit_fixtures/nan_walk.py.
"""

import inspect
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernelgym.envs.testing import EnvHarness, check_env
from kit_fixtures import nan_walk

SEED = 20261122


def _division_site() -> str:
    """``<file>:<line>`` of the division in the fixture's step."""
    lines, first = inspect.getsourcelines(nan_walk.step_divides_by_position.py_func)
    offset = next(k for k, line in enumerate(lines) if nan_walk.DIVISION_LINE in line)
    return f"{inspect.getsourcefile(nan_walk.step_divides_by_position.py_func)}:{first + offset}"


def _assert_located(message: str) -> None:
    site = _division_site()
    assert f"NaN/inf arises in step_divides_by_position at {site}" in message, message
    assert nan_walk.DIVISION_LINE in message, message
    assert "local 'direction' = nan" in message, message
    assert re.search(r"env \d+: ", message), message


def test_a_division_by_zero_fails_parity_and_observations_naming_the_line():
    report = check_env(
        nan_walk.DIVIDES_BY_ZERO, backend="cpu", max_examples=20, seed=SEED, checks=["parity", "observations"]
    )
    parity, observations = report["parity"], report["observations"]
    # failed (a finding), not error (a kernel that raised)
    assert parity.status == observations.status == "failed", (parity.message, observations.message)
    assert re.search(r"state 'energy' = nan, reference", parity.message), parity.message
    _assert_located(parity.message)
    assert re.search(r"(observation .* has NaN or inf|state 'energy' = .* has NaN or inf)", observations.message)
    _assert_located(observations.message)


def test_nan_against_nan_is_no_disagreement_but_still_a_finding():
    report = check_env(
        nan_walk.SHARED_NAN, backend="cpu", max_examples=20, seed=SEED, checks=["parity", "observations"]
    )
    assert report["parity"].status == "passed", report["parity"].message
    observations = report["observations"]
    assert observations.status == "failed"
    _assert_located(observations.message)


def test_a_division_by_zero_in_the_reset_is_located_in_the_reset_kernel():
    report = check_env(
        nan_walk.RESET_DIVIDES_BY_ZERO, backend="cpu", max_examples=20, seed=SEED, checks=["parity", "observations"]
    )
    kernel = nan_walk.reset_divides_by_position.py_func
    lines, first = inspect.getsourcelines(kernel)
    line = first + next(k for k, text in enumerate(lines) if nan_walk.RESET_DIVISION_LINE in text)
    site = f"NaN/inf arises in reset_divides_by_position at {inspect.getsourcefile(kernel)}:{line}"
    for name in ("parity", "observations"):
        result = report[name]
        assert result.status == "failed", result.message
        assert site in result.message and "array 'energy' got a NaN or inf" in result.message, result.message
    assert "reset branch: state 'energy' = nan" in report["parity"].message, report["parity"].message


@pytest.mark.parametrize("tolerance", [None, 1e-5], ids=["exact", "tolerance"])
def test_one_step_onto_the_origin(tolerance):
    # staying at the origin: direction 0 / 0 = NaN, and so the energy, in kernel and shared reference
    prev = {"position": np.int32(0).reshape(()), "energy": np.float32(0.5).reshape(())}
    for spec, agrees in ((nan_walk.SHARED_NAN, True), (nan_walk.DIVIDES_BY_ZERO, False)):
        harness = EnvHarness(spec, backend="cpu", rtol=tolerance, atol=tolerance)
        env = harness.make_env(1, seed=3, max_episode_steps=50)
        env.set_state(harness.stack_states([prev]))
        stream = env.get_rng_states()[0]
        result = harness.step(env, np.array([1]))
        assert np.isnan(result.state["energy"][0]) and np.isnan(result.obs[0, 1])
        problems = harness.step_problems(
            prev, 1, stream, result.env_slice(0), result.obs[0], result.rewards[0], result.terminated[0], result.rng[0]
        )
        if agrees:
            assert problems == []
        else:
            assert any(text.startswith("state 'energy' = nan, reference") for text in problems), problems


@given(
    finite=st.floats(-1e30, 1e30, allow_nan=False),
    tolerance=st.sampled_from([None, 1e-5]),
    infinite=st.sampled_from([np.inf, -np.inf]),
)
def test_state_differences_take_nan_as_a_value(finite, tolerance, infinite):
    harness = EnvHarness(nan_walk.SHARED_NAN, backend="cpu", rtol=tolerance, atol=tolerance)
    position = np.int32(1).reshape(())

    def state(energy):
        return {"position": position, "energy": np.float32(energy).reshape(())}

    assert harness.state_differences(state(np.nan), state(np.nan)) == []
    assert harness.state_differences(state(infinite), state(infinite)) == []
    assert harness.state_differences(state(np.nan), state(finite)) != []
    assert harness.state_differences(state(finite), state(np.nan)) != []
    assert harness.state_differences(state(infinite), state(finite)) != []


@pytest.mark.sim
def test_the_simulator_writes_the_nan_and_the_kit_names_the_line():
    report = check_env(nan_walk.DIVIDES_BY_ZERO, backend="sim", max_examples=10, seed=SEED, checks=["observations"])
    observations = report["observations"]
    assert observations.status == "failed", observations.message
    _assert_located(observations.message)
