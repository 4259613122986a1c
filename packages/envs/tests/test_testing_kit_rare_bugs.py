"""The kit finds the bugs the few-dozen-step hypothesis checks miss, and names the user's line.

Planted bugs (kit_fixtures/rare_walk.py, kit_fixtures/clip_push.py): a branch taken with
probability 1e-4 per step (found by drawing the param that guards it from
``EnvSpec.param_ranges``, and, with no range declared, by the ``long_horizon`` check's
replays through the reference), and a NaN made in a ``device_function`` after 400 steps in
one env of 200. The simulator's typing is in test_testing_kit_sim_semantics.py.
"""

import inspect
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgym.envs.testing import check_env, format_report
from kernelgym.envs.testing import strategies as kst
from kernelgym.envs.testing.cli import param_overrides
from kernelgym.envs.testing.report import format_param
from kit_fixtures import rare_walk, walk

SEED = 20261128


def _site(function, text: str) -> str:
    """``<file>:<line>`` of the line of ``function`` holding ``text``."""
    lines, first = inspect.getsourcelines(function)
    offset = next(k for k, line in enumerate(lines) if text in line)
    return f"{inspect.getsourcefile(function)}:{first + offset}"


def test_a_branch_guarded_by_a_param_is_taken_by_drawing_the_param_at_its_end():
    report = check_env(rare_walk.GUST, backend="cpu", max_examples=20, seed=SEED, checks=["parity"])
    parity = report["parity"]
    assert parity.status == "failed", parity.message
    assert "params drawn from EnvSpec.param_ranges {'gust_probability': 0.5}" in parity.message, parity.message
    site = _site(rare_walk.gust_step.py_func, rare_walk.GUST_LINE)
    assert f"position last written by gust_step at {site}" in parity.message, parity.message


def test_a_rare_branch_with_no_range_is_found_by_the_long_horizon_and_replayed_alone():
    # parity draws no params here: the branch (1e-4 per step) is out of its reach
    report = check_env(
        rare_walk.GUST_NO_RANGE, backend="cpu", max_examples=20, seed=SEED, checks=["parity", "long_horizon"]
    )
    assert report["parity"].status == "passed", report["parity"].message
    result = report["long_horizon"]
    assert result.status == "failed", result.message
    assert re.search(
        r"env \d+ of 2048 \(seed \d+\) fails at step \d+, replayed alone: state 'position'", result.message
    )
    site = _site(rare_walk.gust_step.py_func, rare_walk.GUST_LINE)
    assert f"position last written by gust_step at {site}" in result.message, result.message
    history = re.findall(r"^ +step (\d+): action", result.message, flags=re.MULTILINE)
    assert len(history) == 6 and [int(step) for step in history] == list(range(int(history[0]), int(history[0]) + 6))


def test_a_late_nan_made_in_a_device_function_is_reported_at_the_helper_line():
    report = check_env(
        rare_walk.FUEL, backend="cpu", max_examples=20, seed=SEED, checks=["observations", "long_horizon"]
    )
    assert report["observations"].status == "passed", report["observations"].message  # 25 steps: no NaN yet
    result = report["long_horizon"]
    assert result.status == "failed", result.message
    site = _site(rare_walk.gauge.py_func, rare_walk.GAUGE_LINE)
    assert f"NaN/inf arises in gauge at {site}" in result.message, result.message
    assert "a device function the kernel fuel_step calls" in result.message, result.message
    step = int(re.search(r"fails at step (\d+)", result.message).group(1))
    assert 400 <= step <= 401, result.message  # 1 / 0.0025 steps of leaking


def test_a_correct_env_passes_the_long_horizon():
    report = check_env(walk.SPEC, backend="cpu", max_examples=2, seed=SEED, checks=["long_horizon"])
    assert report.passed, format_report(report)
    assert "256 envs x 200 steps" in report["long_horizon"].note  # 2 of 20 examples: the smallest look


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_drawn_params_stay_in_their_ranges_and_compiled_ones_at_their_ends(data):
    spec = rare_walk.GUST
    fixed = data.draw(st.sampled_from([(), ("gust_probability",)]))
    drawn = data.draw(kst.param_overrides(spec, fixed))
    assert not set(drawn) & set(fixed)
    low, high = spec.param_ranges["gust_probability"]
    # gust_probability is compiled into the kernels: drawn only at an end of its range
    assert drawn.get("gust_probability", low) in (low, high)


@settings(max_examples=30, deadline=None)
@given(value=st.floats(allow_nan=False, allow_infinity=False), goal=st.integers(-(2**40), 2**40))
def test_the_reproduce_line_carries_every_param_override_exactly(value, goal):
    overrides = param_overrides(walk.SPEC, [f"step_cost={format_param(value)}", f"goal={format_param(goal)}"])
    assert overrides == {"step_cost": value, "goal": goal}
    assert type(overrides["goal"]) is int and type(overrides["step_cost"]) is float


def test_a_failing_report_repeats_the_env_and_the_params_it_was_given():
    report = check_env(
        "kit_fixtures.walk:REWARD_IGNORES_TERMINATION",
        backend="cpu",
        max_examples=10,
        seed=SEED,
        checks=["parity"],
        params={"goal": 2, "step_cost": 0.25},
    )
    assert not report.passed
    reproduce = format_report(report).splitlines()[-1]
    assert reproduce.startswith("reproduce: kernelgym check kit_fixtures.walk:REWARD_IGNORES_TERMINATION --backend cpu")
    assert reproduce.endswith("--param goal=2 --param step_cost=0.25")


@pytest.mark.parametrize(
    ("texts", "expected"),
    [
        (["goal"], "expected NAME=VALUE, received 'goal'"),
        (["speed=1"], "expected a scalar params field of Walk-v0 (one of ['goal', 'goal_reward', 'start_range',"),
        (["goal=1.5"], "expected goal=<int>, received goal=1.5"),
        (["goal=1", "goal=2"], "expected each field once, received 'goal' twice"),
    ],
)
def test_bad_param_arguments_are_refused_naming_the_argument(texts, expected):
    with pytest.raises(ValueError, match=r"^argument --param: ") as error:
        param_overrides(walk.SPEC, texts)
    assert expected in str(error.value)


@pytest.mark.parametrize(
    ("ranges", "expected"),
    [
        ({"nope": (0.0, 1.0)}, "expected names of int or float params fields"),
        ({"gust_probability": (0.5, 0.1)}, "expected a tuple (low, high) of finite floats with low <= high"),
        ({"limit": (1.5, 3)}, "expected a tuple (low, high) of finite ints"),
        ({"gust_probability": (0.0, float("inf"))}, "got (0.0, inf)"),
    ],
)
def test_bad_param_ranges_are_refused_naming_the_field(ranges, expected):
    import dataclasses

    with pytest.raises(ValueError, match=r"param_ranges") as error:
        dataclasses.replace(rare_walk.GUST, param_ranges=ranges)
    assert expected in str(error.value)


def test_a_spec_with_a_lambda_reaches_the_gpu_compile_child_by_module_and_name():
    from kernelgym.envs.spec import load_reference
    from kernelgym.envs.testing.child_process import transportable_env

    name = transportable_env(rare_walk.GUST_LAMBDA_AGENTS)  # not picklable, not from an entry point
    assert name == "kit_fixtures.rare_walk:GUST_LAMBDA_AGENTS"
    assert load_reference(name) is rare_walk.GUST_LAMBDA_AGENTS


def test_check_env_takes_the_module_attr_form_and_the_report_keeps_it_to_reproduce():
    report = check_env(
        "kit_fixtures.rare_walk:GUST_LAMBDA_AGENTS", backend="cpu", max_examples=3, seed=SEED, checks=["parity"]
    )
    assert report.passed, format_report(report)
    assert report.env_id == "GustWalkLambdaAgents-v0" and report.source == "kit_fixtures.rare_walk:GUST_LAMBDA_AGENTS"


def test_the_determinism_note_does_not_call_a_drawn_start_fixed():
    # LeakyFuel's reset draws whether the env leaks (1 in 200): every probe starts alike
    note = check_env(rare_walk.FUEL, backend="cpu", max_examples=2, seed=SEED, checks=["determinism"])[
        "determinism"
    ].note
    assert "draws from its stream but gave one start state" in note and "fixed" not in note, note
    fixed = check_env(rare_walk.GUST, backend="cpu", max_examples=2, seed=SEED, checks=["determinism"])["determinism"]
    assert fixed.note == "the reference's start state is fixed, so different seeds may give the same trajectory"


def test_the_check_command_takes_params_and_refuses_a_bad_one_naming_it(capsys):
    from kernelgym.envs.testing.cli import main_check

    name = "kit_fixtures.rare_walk:GUST_NO_RANGE"
    common = [name, "--backend", "cpu", "--checks", "parity", "--max-examples", "2", "--seed", "1"]
    assert main_check([*common, "--param", "limit=3"]) == 0
    assert "kernelgym check GustWalkNoRange-v0 on backend 'cpu': PASSED" in capsys.readouterr().out
    assert main_check([*common, "--param", "limit=wide"]) == 1
    assert "argument --param: expected limit=<int>, received limit=wide" in capsys.readouterr().err
