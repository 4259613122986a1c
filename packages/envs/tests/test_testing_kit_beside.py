"""The kit's checks in child processes beside the other checks (`kernelgym.envs.testing.beside`):
forked where this process can fork, started otherwise; the same finding as in the kit's own process."""

import dataclasses
import subprocess
import sys
import tempfile

import pytest

from kernelgym.envs.testing import beside, check_env, format_report
from kernelgym.envs.testing.beside import BESIDE_NOTE, BesideChild, PendingCheck
from kernelgym.envs.testing.checks import CheckConfig
from kernelgym.envs.testing.child_process import fork_refusal
from kernelgym.envs.testing.harness import EnvHarness
from kit_fixtures import agent_walk, rare_walk, walk

SEED = 20261129


@pytest.fixture(params=["forked", "started"])
def child(request, monkeypatch):
    """Each test once with forked children and once with started ones (this process refusing to fork)."""
    if request.param == "forked":
        if fork_refusal() is not None:
            pytest.fail(f"the kit's tests run where a process can fork; here: {fork_refusal()}")
    else:
        monkeypatch.setattr(beside, "fork_refusal", lambda: "refused by the test")
    return request.param


@pytest.fixture
def any_horizon_beside(monkeypatch):
    # the fixtures' references are quick: their replays would run in order in a started child
    monkeypatch.setattr(beside, "MIN_BESIDE_SECONDS", 0.0)


def _long_horizon(spec, first_check=None, max_examples=20):
    checks = [first_check, "long_horizon"] if first_check else ["long_horizon"]
    return check_env(spec, backend="cpu", max_examples=max_examples, seed=SEED, checks=checks)["long_horizon"]


def test_a_failure_found_beside_is_the_one_found_in_order(any_horizon_beside, child):
    # a branch taken with probability 1e-4 per step, found only by the long horizon's replays
    beside = _long_horizon(rare_walk.GUST_NO_RANGE, first_check="parity")
    in_order = _long_horizon(rare_walk.GUST_NO_RANGE)  # the first check: nothing to run beside
    assert beside.status == in_order.status == "failed", (beside.message, in_order.message)
    assert beside.message == in_order.message
    assert beside.example == in_order.example


def test_a_pass_beside_says_where_it_ran_and_notes_what_the_check_notes(any_horizon_beside, child):
    beside = _long_horizon(walk.SPEC, first_check="determinism")
    assert beside.status == "passed", beside.message
    assert beside.note == f"2048 envs x 2000 steps, 32 replayed through the reference; {BESIDE_NOTE}"


def test_a_spec_a_started_child_cannot_receive_runs_in_order_and_a_forked_one_beside(any_horizon_beside, child):
    # a lambda, in no module's globals and registered by no entry point: neither pickled nor importable
    local = dataclasses.replace(walk.SPEC, id="LocalWalk-v0", num_agents=lambda params: 1)
    report = check_env(local, backend="cpu", max_examples=20, seed=SEED, checks=["determinism", "long_horizon"])
    assert report.passed, format_report(report)
    assert (BESIDE_NOTE in report["long_horizon"].note) == (child == "forked")


def test_a_quick_horizon_runs_in_order_unless_the_child_is_a_fork(child):
    # a toy env's reference: its replays take less than a started child's imports, not than a fork
    result = _long_horizon(walk.SPEC, first_check="determinism")
    assert result.status == "passed", result.message
    assert (BESIDE_NOTE in result.note) == (child == "forked") and "2048 envs x 2000 steps" in result.note


@pytest.mark.parametrize(
    "spec, check",
    [
        (agent_walk.SHARED_STREAM, "agent_order"),
        (walk.MISSED_RESET, "autoreset"),
    ],
)
def test_a_forked_check_finds_what_the_check_finds_in_order(spec, check):
    forked = check_env(spec, backend="cpu", max_examples=20, seed=SEED, checks=["determinism", check])[check]
    in_order = check_env(spec, backend="cpu", max_examples=20, seed=SEED, checks=[check])[check]
    assert forked.status == in_order.status == "failed", (forked.message, in_order.message)
    assert forked.message == in_order.message
    assert forked.example == in_order.example


def test_forked_checks_pass_as_in_order_and_every_other_check_stays_in_order():
    checks = ["parity", "determinism", "agent_order", "autoreset", "invariants", "long_horizon", "stateful"]
    report = check_env(agent_walk.SPEC, backend="cpu", max_examples=5, seed=SEED, checks=checks)
    assert report.passed, format_report(report)
    for result in report.results:  # (the forked checks' notes say where they ran)
        assert (BESIDE_NOTE in result.note) == (result.name in beside.FORKED_BESIDE), result


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
    result = PendingCheck("long_horizon", BesideChild(process, folder, ["long_horizon"])).result()
    assert result.status == "error"
    assert result.message.startswith("the check's child process failed (exit 5):")
    assert "the child broke" in result.message


def test_the_kit_runs_its_own_checks_before_it_collects_a_childs_and_reports_in_order(monkeypatch):
    # the kit's process never waits for a child while it has checks of its own to run: the
    # children's results are collected after them, each in its place in the report
    from kernelgym.envs.testing import runner
    from kernelgym.envs.testing.report import PASSED, CheckResult

    events = []

    class Recorded(PendingCheck):
        def result(self):
            events.append(("collected", self.name))
            return CheckResult(self.name, PASSED, 0.0, note=BESIDE_NOTE)

        def cancel(self):
            pass

    def run_one(check, harness, config):
        events.append(("ran", check.name))
        return CheckResult(check.name, PASSED, 0.0)

    def start(rest, harness, config, run_one):
        return {check.name: Recorded(check.name, None) for check in rest if check.name in beside.FORKED_BESIDE}

    monkeypatch.setattr(runner, "_run_one", run_one)
    monkeypatch.setattr(runner, "start_beside", start)
    checks = ["parity", "determinism", "agent_order", "autoreset", "invariants", "long_horizon", "stateful"]
    report = check_env(walk.SPEC, backend="cpu", seed=SEED, checks=checks)
    assert [result.name for result in report.results] == checks
    own = [name for name in checks if name not in beside.FORKED_BESIDE]
    forked = [name for name in checks if name in beside.FORKED_BESIDE]
    assert events == [("ran", name) for name in own] + [("collected", name) for name in forked]
    assert [result.note == BESIDE_NOTE for result in report.results] == [name in forked for name in checks]
