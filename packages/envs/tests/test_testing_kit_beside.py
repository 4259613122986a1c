"""The kit's long_horizon check in a child process beside the other checks
(`kernelgym.envs.testing.beside`): the same finding as in the kit's own process."""

import dataclasses
import subprocess
import sys
import tempfile

import pytest

from kernelgym.envs.testing import beside, check_env, format_report
from kernelgym.envs.testing.beside import BESIDE_NOTE, PendingCheck
from kernelgym.envs.testing.checks import CheckConfig
from kernelgym.envs.testing.harness import EnvHarness
from kit_fixtures import rare_walk, walk

SEED = 20261129


@pytest.fixture
def any_horizon_beside(monkeypatch):
    # the fixtures' references are quick: their replays would run in order
    monkeypatch.setattr(beside, "MIN_BESIDE_SECONDS", 0.0)


def _long_horizon(spec, first_check=None, max_examples=20):
    checks = [first_check, "long_horizon"] if first_check else ["long_horizon"]
    return check_env(spec, backend="cpu", max_examples=max_examples, seed=SEED, checks=checks)["long_horizon"]


def test_a_failure_found_beside_is_the_one_found_in_order(any_horizon_beside):
    # a branch taken with probability 1e-4 per step, found only by the long horizon's replays
    beside = _long_horizon(rare_walk.GUST_NO_RANGE, first_check="parity")
    in_order = _long_horizon(rare_walk.GUST_NO_RANGE)  # the first check: nothing to run beside
    assert beside.status == in_order.status == "failed", (beside.message, in_order.message)
    assert beside.message == in_order.message
    assert beside.example == in_order.example


def test_a_pass_beside_says_where_it_ran_and_notes_what_the_check_notes(any_horizon_beside):
    beside = _long_horizon(walk.SPEC, first_check="determinism")
    assert beside.status == "passed", beside.message
    assert beside.note == f"2048 envs x 2000 steps, 32 replayed through the reference; {BESIDE_NOTE}"


def test_a_spec_the_child_cannot_receive_runs_the_check_in_order(any_horizon_beside):
    # a lambda, in no module's globals and registered by no entry point: neither pickled nor importable
    local = dataclasses.replace(walk.SPEC, id="LocalWalk-v0", num_agents=lambda params: 1)
    report = check_env(local, backend="cpu", max_examples=20, seed=SEED, checks=["determinism", "long_horizon"])
    assert report.passed, format_report(report)
    assert BESIDE_NOTE not in report["long_horizon"].note


def test_a_quick_horizon_runs_in_order():
    # a toy env's reference: its replays take less than a child process's start
    result = _long_horizon(walk.SPEC, first_check="determinism")
    assert result.status == "passed", result.message
    assert BESIDE_NOTE not in result.note and "2048 envs x 2000 steps" in result.note


def test_the_replays_estimate_scales_with_the_horizon():
    harness = EnvHarness(walk.SPEC, "cpu")
    full = beside.replay_seconds(harness, CheckConfig(max_examples=20))
    quick = beside.replay_seconds(harness, CheckConfig(max_examples=2))
    assert 0 < quick < full < beside.MIN_BESIDE_SECONDS  # 2 of 20 examples: 200 steps of 3 envs, not 2000 of 32


def test_a_child_that_dies_is_an_error_with_its_stderr():
    folder = tempfile.TemporaryDirectory()
    with open(f"{folder.name}/stderr.txt", "w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.stderr.write('the child broke'); sys.exit(5)"], stderr=stderr
        )
    result = PendingCheck("long_horizon", process, folder).result()
    assert result.status == "error"
    assert result.message.startswith("the check's child process failed (exit 5):")
    assert "the child broke" in result.message
