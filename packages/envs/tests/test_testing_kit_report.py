"""check_env's argument checks, format_report and main_check (the `kernelgym check` command)."""

import importlib
import re
import subprocess
import sys

import pytest

from kernelgym.core.compile_notice import compile_notice
from kernelgym.envs.testing import DEFAULT_MAX_EXAMPLES, CheckResult, Report, check_env, format_report, main_check
from kernelgym.envs.testing.progress import compile_progress
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


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"max_examples": 0}, ValueError, "max_examples"),
        ({"max_examples": 2.5}, ValueError, "max_examples"),
        ({"seed": -1}, ValueError, "seed"),
        ({"checks": ["parity", "speed"]}, KeyError, "speed"),
        ({"checks": []}, ValueError, "checks"),
        ({"params": [1]}, TypeError, "params"),
        ({"params": {"no_such_field": 1}}, TypeError, "no_such_field"),
        ({"backend": "tpu"}, ValueError, "backend"),
        ({"rtol": -1.0}, ValueError, "rtol"),
        ({"progress": "yes"}, TypeError, "progress"),
    ],
)
def test_check_env_refuses_bad_arguments_before_running(kwargs, error, words):
    with pytest.raises(error, match=words):
        check_env(walk.SPEC, **{"backend": "cpu", **kwargs})


def test_check_env_refuses_unknown_envs():
    with pytest.raises(KeyError, match="NoSuchEnv"):
        check_env("NoSuchEnv-v0", backend="cpu")
    with pytest.raises(TypeError, match="env"):
        check_env(42, backend="cpu")


def test_main_check_exit_codes_and_output(capsys):
    assert (
        main_check(["kit_fixtures.walk:SPEC", "--checks", "parity,invariants", "--max-examples", "3", "--seed", "1"])
        == 0
    )
    out = capsys.readouterr().out
    assert "kernelgym check Walk-v0 on backend 'cpu': PASSED" in out and "[ok  ] parity" in out
    assert (
        main_check(
            [
                "kit_fixtures.walk:REWARD_IGNORES_TERMINATION",
                "--checks",
                "parity",
                "--max-examples",
                "20",
                "--seed",
                "1",
            ]
        )
        == 1
    )
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


def test_the_header_states_backend_precision_fast_math_examples_and_what_was_compared():
    passed = CheckResult("parity", "passed", 1.0)
    text = format_report(
        Report("Walk-v0", "cpu", 20, 42, (passed,), 3.5, precision="float32", fast_math=True, rtol=1e-5, atol=1e-6)
    )
    assert "backend cpu, precision float32, fast-math build checked too; 20 hypothesis examples per check" in text
    assert "floats within rtol 1e-05, atol 1e-06 (check_env's rtol/atol; 0 for exact)" in text
    assert "RNG stream rows exactly" in text and "fewer than cpu" not in text
    exact = format_report(_report(passed))
    assert "precision none (env has no precision choice);" in exact and "fast-math" not in exact
    assert "compared with the reference: floats exactly (NaN equal to NaN)" in exact
    cuda = format_report(Report("Walk-v0", "cuda", 20, 1, (passed,), 1.0, rtol=1e-5, atol=1e-6))
    assert "CUDA_TOLERANCE: libdevice's transcendental functions differ from libm" in cuda
    failed = CheckResult("parity", "failed", 1.0, message="no")
    assert "--seed 42 --precision float32" in format_report(
        Report("Walk-v0", "cpu", 7, 42, (failed,), 1.0, precision="float32")
    )


@pytest.mark.parametrize("examples", [1, DEFAULT_MAX_EXAMPLES["sim"], DEFAULT_MAX_EXAMPLES["cpu"]])
def test_a_sim_report_says_when_it_ran_fewer_examples_than_cpu(examples):
    text = format_report(Report("Walk-v0", "sim", examples, 1, (CheckResult("parity", "passed", 1.0),), 1.0))
    full = DEFAULT_MAX_EXAMPLES["cpu"]
    fewer = f"sim: {examples} examples per check, fewer than cpu's {full}"
    assert (fewer in text) == (examples < full), text


def test_check_env_reports_the_precision_tolerances_and_fast_math_it_used():
    report = check_env(walk.SPEC, backend="cpu", max_examples=2, seed=1, checks=["invariants"])
    assert (report.precision, report.fast_math, report.rtol, report.atol) == (None, False, 1e-5, 1e-6)
    exact = check_env(walk.SPEC, backend="cpu", max_examples=2, seed=1, checks=["invariants"], rtol=0.0, atol=0.0)
    assert "floats exactly" in format_report(exact)


def test_the_commands_help_states_the_example_counts_that_run(capsys):
    with pytest.raises(SystemExit):
        main_check(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert f"default: {DEFAULT_MAX_EXAMPLES['cpu']}, {DEFAULT_MAX_EXAMPLES['sim']} on sim" in out, out


def test_precision_is_refused_for_an_env_without_the_choice_with_exit_code_2(capsys):
    with pytest.raises(SystemExit) as exit_:
        main_check(["kit_fixtures.walk:SPEC", "--precision", "float32"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert "argument --precision: expected no --precision for Walk-v0" in err and "received 'float32'" in err


def _cached_function_module(tmp_path, name: str, cache: bool):
    # a new file: numba's on-disk cache has never seen it, so the first call compiles
    (tmp_path / f"{name}.py").write_text(
        f"from numba import njit\n\n@njit(cache={cache})\ndef twice(x):\n    return 2 * x\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(tmp_path))


def test_compile_progress_says_what_compiles_and_how_long_it_took(tmp_path, capsys):
    module = _cached_function_module(tmp_path, f"kitux_cached_{tmp_path.name}", cache=True)
    with compile_progress("Walk-v0", "cpu", "parity"):
        assert module.twice(2) == 4
    err = capsys.readouterr().err
    assert re.fullmatch(
        r"kernelgym check: compiling Walk-v0 kernels for cpu, check parity "
        r"\(first run; cached afterwards\)\.\.\. \d+\.\d s\n",
        err,
    ), err
    # compiled already: nothing to say
    with compile_progress("Walk-v0", "cpu", "parity"):
        assert module.twice(3) == 6
    assert capsys.readouterr().err == ""


def test_compile_progress_speaks_instead_of_the_envs_own_compile_line(tmp_path, capsys):
    # a check makes envs (their own "compiling ..." line, `kernelgym.core.compile_notice`): one line, the kit's
    module = _cached_function_module(tmp_path, f"kitux_notice_{tmp_path.name}", cache=True)
    with compile_notice(f"Notice-{tmp_path.name}-v0", "cpu"), compile_progress("Walk-v0", "cpu", "parity"):
        assert module.twice(2) == 4
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kernelgym check: compiling Walk-v0"), lines


def test_compile_progress_is_silent_when_disabled_or_for_uncached_functions(tmp_path, capsys):
    cached = _cached_function_module(tmp_path, f"kitux_quiet_{tmp_path.name}", cache=True)
    with compile_progress("Walk-v0", "cpu", "parity", enabled=False):
        assert cached.twice(2) == 4
    # a function without an on-disk cache compiles in every process: not "first run" news
    uncached = _cached_function_module(tmp_path, f"kitux_uncached_{tmp_path.name}", cache=False)
    with compile_progress("Walk-v0", "cpu", "parity"):
        assert uncached.twice(2) == 4
    assert capsys.readouterr().err == ""


def test_the_kit_imports_under_python_oo_which_strips_the_docstrings_its_check_descriptions_come_from():
    code = (
        "from kernelgym.envs.testing import checks, fast_math\n"
        "assert all(isinstance(check.description, str) for check in checks.CHECKS)"
    )
    result = subprocess.run([sys.executable, "-OO", "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
