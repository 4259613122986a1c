"""check_env's argument checks, format_report and main_check (the `kernelgym check` command)."""

import pytest

from kernelgym.envs.testing import CheckResult, Report, check_env, format_report, main_check
from kit_fixtures import walk


def _report(*results):
    return Report("Walk-v0", "cpu", 7, 42, tuple(results), 3.5)


def test_format_report_lists_every_check_and_shows_failures_with_their_example():
    passed = CheckResult("parity", "passed", 1.25, note="a remark")
    failed = CheckResult("determinism", "failed", 2.0, message="two envs diverged", example="Failing test case: x=1")
    text = format_report(_report(passed, failed))
    assert "Walk-v0" in text and "'cpu'" in text and "FAILED (1 of 2 checks)" in text
    assert "[ok  ] parity" in text and "(a remark)" in text and "[FAIL] determinism" in text
    assert "two envs diverged" in text and "Failing test case: x=1" in text
    assert "--max-examples 7 --seed 42" in text
    assert "PASSED" in format_report(_report(passed)) and "reproduce" not in format_report(_report(passed))


def test_report_lookup_and_verdict():
    report = _report(CheckResult("parity", "passed", 0.1), CheckResult("stateful", "not run", 0.0, "unsafe"))
    assert not report.passed and [r.name for r in report.failures] == ["stateful"]
    assert report["parity"].passed
    with pytest.raises(KeyError, match="nope"):
        report["nope"]


@pytest.mark.parametrize(("kwargs", "error", "words"), [
    ({"max_examples": 0}, ValueError, "max_examples"),
    ({"max_examples": 2.5}, ValueError, "max_examples"),
    ({"seed": -1}, ValueError, "seed"),
    ({"checks": ["parity", "speed"]}, KeyError, "speed"),
    ({"checks": []}, ValueError, "checks"),
    ({"params": [1]}, TypeError, "params"),
    ({"params": {"no_such_field": 1}}, TypeError, "no_such_field"),
    ({"backend": "tpu"}, ValueError, "backend"),
    ({"rtol": -1.0}, ValueError, "rtol"),
])
def test_check_env_refuses_bad_arguments_before_running(kwargs, error, words):
    with pytest.raises(error, match=words):
        check_env(walk.SPEC, **{"backend": "cpu", **kwargs})


def test_check_env_refuses_unknown_envs():
    with pytest.raises(KeyError, match="NoSuchEnv"):
        check_env("NoSuchEnv-v0", backend="cpu")
    with pytest.raises(TypeError, match="env"):
        check_env(42, backend="cpu")


def test_main_check_exit_codes_and_output(capsys):
    assert main_check(["kit_fixtures.walk:SPEC", "--checks", "parity,invariants", "--max-examples", "3",
                       "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "kernelgym check Walk-v0 on backend 'cpu': PASSED" in out and "[ok  ] parity" in out
    assert main_check(["kit_fixtures.walk:REWARD_IGNORES_TERMINATION", "--checks", "parity",
                       "--max-examples", "20", "--seed", "1"]) == 1
    out = capsys.readouterr().out
    assert "[FAIL] parity" in out and "shrunk example" in out and "reproduce: kernelgym check" in out
    assert main_check(["NoSuchEnv-v0", "--max-examples", "2"]) == 1
    assert "NoSuchEnv-v0" in capsys.readouterr().err
    assert main_check(["kit_fixtures.walk:SPEC", "--checks", "speed"]) == 1
    assert "speed" in capsys.readouterr().err


def test_main_check_runs_the_simulator_in_a_child_process_when_needed(capfd):
    # in a process without NUMBA_ENABLE_CUDASIM the command re-runs itself with it set
    code = main_check(["CartPole-v1", "--backend", "sim", "--checks", "out_of_bounds", "--max-examples", "2"])
    out, err = capfd.readouterr()
    assert code == 0, out + err
    assert "on backend 'sim': PASSED" in out
