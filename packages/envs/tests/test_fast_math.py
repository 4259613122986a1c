"""``fast_math=True``: the opt-in fast-math build (FMA contraction on), within its stated tolerance.

The tolerance (`kernelgym.envs.testing.fast_math.FAST_MATH_TOLERANCE`) is proven by the
kit's ``fast_math`` check on the cpu's FMA-contracting twin, for the four classic envs in
both precisions; the float32 builds really differ from the default (the twin contracts
the envs' own arithmetic), and bad values are refused by name before anything compiles.
"""

import sys

import gymnasium
import numpy as np
import pytest

import kernelgym.envs as kge
from kernelgym.envs.testing import check_env, format_report, main_check
from kernelgym.envs.testing import fast_math as kit_fast_math
from kit_fixtures import clip_push

CLASSIC = ("CartPole-v1", "Pendulum-v1", "MountainCar-v0", "Acrobot-v1")
PRECISIONS = ("float64", "float32")


def _launchers() -> set:
    return {name for name in sys.modules if name.startswith("kernelgym_launchers.")}


def test_this_cpu_fuses_so_the_twin_is_a_contracting_one():
    # without FMA hardware every proof below would compare the default build with itself
    assert kit_fast_math.cpu_fuses(), kit_fast_math.NO_FMA


# ------------------------------------------------------------------------ validation
@pytest.mark.parametrize("bad", ["yes", 1, None, 0.0])
def test_a_fast_math_that_is_not_a_bool_is_refused_by_name_before_anything_compiles(bad):
    before = _launchers()
    # a params value no other test uses: compiling would import a new launcher module
    with pytest.raises(TypeError, match=rf"fast_math: expected True or False, got {type(bad).__name__} "):
        kge.make("CartPole-v1", 2, backend="cpu", fast_math=bad, gravity=9.80675)
    assert _launchers() == before


def test_the_kit_refuses_a_fast_math_that_is_not_a_bool():
    with pytest.raises(TypeError, match=r"fast_math: expected True or False, got str 'yes'"):
        check_env("CartPole-v1", backend="cpu", checks=["parity"], fast_math="yes")


# ------------------------------------------------------------------- the make paths
def test_make_builds_a_contracted_module_and_the_default_none():
    before = _launchers()
    env = kge.make("CartPole-v1", 3, backend="cpu", seed=0, fast_math=True, precision="float32")
    assert env.fast_math is True and kge.make("CartPole-v1", 1, backend="cpu").fast_math is False
    env.reset()
    env.step(np.zeros(3, np.int64))
    new = {name.rpartition(".")[2] for name in _launchers() - before}
    contracted = {name for name in _launchers() if name.rpartition(".")[2].startswith("contracted_program_")}
    assert contracted, new
    for name in contracted:
        assert "fastmath" in sys.modules[name].cpu_launcher.targetoptions


def test_gymnasium_make_and_make_vec_pass_fast_math():
    env = gymnasium.make("kernelgym/CartPole-v1", fast_math=True)
    assert env.unwrapped.env.fast_math is True
    vector = gymnasium.make_vec(
        "kernelgym/CartPole-v1", num_envs=2, vectorization_mode="vector_entry_point", fast_math=True, backend="cpu"
    )
    assert vector.unwrapped.env.fast_math is True
    with pytest.raises(TypeError, match="fast_math: expected True or False"):
        gymnasium.make("kernelgym/CartPole-v1", fast_math="on")


# --------------------------------------------------------------- the tolerance proof
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("env_id", CLASSIC)
def test_the_fast_math_build_stays_within_the_stated_tolerance(env_id, precision):
    report = check_env(env_id, backend="cpu", precision=precision, checks=["fast_math"], max_examples=4, seed=7)
    assert report.passed, format_report(report)
    rtol, atol = kit_fast_math.FAST_MATH_TOLERANCE[precision]
    assert report["fast_math"].note.startswith(f"cpu twin, {precision}: rtol {rtol}, atol {atol}")


@pytest.mark.parametrize("env_id", ("CartPole-v1", "Pendulum-v1", "Acrobot-v1"))
def test_the_float32_fast_math_build_does_not_give_the_default_bits(env_id):
    # the twin contracts the envs' own arithmetic: their float32 steps leave the default bits
    envs = [
        kge.make(env_id, 256, backend="cpu", seed=1, precision="float32", fast_math=fast_math)
        for fast_math in (False, True)
    ]
    for env in envs:
        env.reset(seed=1)
    actions = np.asarray(envs[0].action_space.sample())
    default, fast = (env.step(actions, numpy=True)[0] for env in envs)
    rtol, atol = kit_fast_math.FAST_MATH_TOLERANCE["float32"]
    np.testing.assert_allclose(fast, default, rtol=rtol, atol=atol)
    assert not np.array_equal(fast, default)


def test_the_check_fails_a_build_outside_the_tolerance(monkeypatch):
    # a zero tolerance: the float32 fast-math build differs from the default, so the check must fail
    monkeypatch.setitem(kit_fast_math.FAST_MATH_TOLERANCE, "float32", (0.0, 0.0))
    report = check_env("Pendulum-v1", backend="cpu", precision="float32", checks=["fast_math"], max_examples=2, seed=7)
    assert not report.passed
    assert "outside the fast-math tolerance (float32: rtol 0.0, atol 0.0)" in report["fast_math"].message
    assert "--fast-math" in format_report(report)


# ------------------------------------------------------------------------ the cli
def test_kernelgym_check_fast_math_reports_the_proof(capsys):
    code = main_check(
        [
            "CartPole-v1",
            "--backend",
            "cpu",
            "--checks",
            "parity",
            "--fast-math",
            "--precision",
            "float32",
            "--max-examples",
            "2",
            "--seed",
            "3",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "[ok  ] parity" in out and "[ok  ] fast_math" in out
    rtol, atol = kit_fast_math.FAST_MATH_TOLERANCE["float32"]
    assert f"cpu twin, float32: rtol {rtol}, atol {atol}; worst |difference|" in out


def test_an_env_without_a_precision_choice_is_checked_in_its_state_precision():
    # ClipPush: float32 state, no declared precisions, a multiply-add the twin contracts (as
    # TagContinuous, whose two builds took 3 minutes of CI for the same finding)
    report = check_env(clip_push.SPEC, backend="cpu", checks=["fast_math"], max_examples=2, seed=5)
    assert report.passed, format_report(report)
    rtol, atol = kit_fast_math.FAST_MATH_TOLERANCE["float32"]
    assert report["fast_math"].note.startswith(f"cpu twin, float32: rtol {rtol}, atol {atol}")


@pytest.mark.sim
def test_on_sim_the_fast_math_build_gives_the_default_bits():
    # the simulator runs kernels as Python, which never contracts: nothing to prove there
    envs = [
        kge.make("CartPole-v1", 4, backend="sim", seed=2, precision="float32", fast_math=fast_math)
        for fast_math in (False, True)
    ]
    resets = [env.reset(seed=2, numpy=True)[0] for env in envs]
    np.testing.assert_array_equal(*resets)
    for _ in range(2):
        actions = np.asarray(envs[0].action_space.sample())
        default, fast = (env.step(actions, numpy=True)[:2] for env in envs)
        np.testing.assert_array_equal(fast[0], default[0])
        np.testing.assert_array_equal(fast[1], default[1])
