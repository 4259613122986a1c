"""``precision``: the classic envs compiled for float64 (default, bitwise as before) or float32.

One source of physics for both: the kit's exact kernel-vs-reference checks hold in
float32 too (the reference runs the same functions with float32 inputs); float32 stays
within `FLOAT32_ATOL`/`FLOAT32_RTOL` of float64 and of gymnasium's own envs over short
horizons; bad values are refused by name before anything compiles.
"""

import dataclasses
import sys

import gymnasium
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import kernelgym.envs as kge
from kernelgym.envs.classic import cartpole
from kernelgym.envs.spec import CPUReference
from kernelgym.envs.testing import check_env, format_report
from kernelgym.envs.vector_env import KernelVectorEnv

CLASSIC = ("CartPole-v1", "Pendulum-v1", "MountainCar-v0", "Acrobot-v1")
# The stated tolerance of float32 against float64 (and gymnasium) over HORIZON steps from
# the same state with the same actions: about 100 float32 roundings of a value near 1
# (measured worst over 4096 reachable states: 2.4e-6, Pendulum's speed at 10 steps).
FLOAT32_ATOL = 1e-5
FLOAT32_RTOL = 1e-5
HORIZON = 10
BATCH = 32
WARMUP_STEPS = 8  # random steps in float64 before the comparison: states an agent reaches
EXACT = {"rtol": 0.0, "atol": 0.0}  # the kit's comparisons bit for bit


def _launchers() -> set:
    return {name for name in sys.modules if name.startswith("kernelgym_launchers.")}


# ------------------------------------------------------------------------ validation
@pytest.mark.parametrize("bad", ["float16", "Float32", 32, np.float32])
def test_an_unknown_precision_is_refused_by_name_before_anything_compiles(bad):
    before = _launchers()
    # a params value no other test uses: compiling would import a new launcher module
    with pytest.raises(ValueError, match=r"precision: expected None or one of \('float64', 'float32'\), got "):
        kge.make("CartPole-v1", 2, backend="cpu", precision=bad, gravity=9.80665)
    assert _launchers() == before


def test_an_env_without_a_declared_choice_refuses_any_precision():
    for precision in ("float32", "float64"):
        with pytest.raises(
            ValueError,
            match=r"precision: env 'TagGridWorld-v0' declares no precision choice .*"
            rf"got '{precision}'",
        ):
            kge.make("TagGridWorld-v0", 2, backend="cpu", precision=precision)
    assert kge.make("TagGridWorld-v0", 2, backend="cpu").precision is None


def test_an_env_refuses_a_precision_it_does_not_declare():
    only_float64 = dataclasses.replace(cartpole.SPEC, id="CartPoleFloat64Only-v1", precisions=("float64",))
    with pytest.raises(
        ValueError,
        match=r"precision: env 'CartPoleFloat64Only-v1' supports \('float64',\), "
        r"got 'float32'",
    ):
        KernelVectorEnv(only_float64, 2, backend="cpu", precision="float32")


@pytest.mark.parametrize(
    "precisions, error", [(("float16",), ValueError), (("float32", "float32"), ValueError), ("float32", TypeError)]
)
def test_a_spec_declares_distinct_known_precisions(precisions, error):
    with pytest.raises(error, match="precisions"):
        dataclasses.replace(cartpole.SPEC, precisions=precisions)


# ------------------------------------------------------------------- the make paths
@pytest.mark.parametrize("env_id", CLASSIC)
def test_float32_keeps_the_documented_dtypes(env_id):
    env = kge.make(env_id, 3, backend="cpu", seed=0, precision="float32")
    assert env.precision == "float32" and kge.make(env_id, 1, backend="cpu").precision == "float64"
    obs, _ = env.reset()
    obs, rewards, terminated, truncated, _ = env.step(np.asarray(env.action_space.sample()))
    assert obs.dtype == rewards.dtype == torch.float32
    assert env.single_observation_space.dtype == np.float32
    assert all(array.dtype == np.float32 for array in env.get_state().values())


def test_gymnasium_make_and_make_vec_pass_the_precision():
    env = gymnasium.make("kernelgym/CartPole-v1", precision="float32")
    assert env.unwrapped.env.precision == "float32"
    obs, _ = env.reset(seed=0)
    assert obs.dtype == np.float32
    vector = gymnasium.make_vec(
        "kernelgym/CartPole-v1", num_envs=2, vectorization_mode="vector_entry_point", precision="float32", backend="cpu"
    )
    assert vector.unwrapped.env.precision == "float32"
    with pytest.raises(ValueError, match="precision: expected"):
        gymnasium.make("kernelgym/CartPole-v1", precision="half")


# ------------------------------------------------------------- exact kit parity in float32
@pytest.mark.parametrize("env_id", CLASSIC)
def test_the_kit_finds_kernel_and_reference_equal_bit_for_bit_in_float32(env_id):
    report = check_env(
        env_id,
        backend="cpu",
        precision="float32",
        max_examples=3,
        seed=3,
        checks=["parity", "autoreset", "observations"],
        **EXACT,
    )
    assert report.passed, format_report(report)


@pytest.mark.sim
def test_the_kit_finds_cartpole_kernel_and_reference_equal_bit_for_bit_in_float32_on_sim():
    report = check_env(
        "CartPole-v1",
        backend="sim",
        precision="float32",
        max_examples=2,
        seed=3,
        checks=["parity", "autoreset"],
        **EXACT,
    )
    assert report.passed, format_report(report)


def test_a_float32_kernel_checked_against_the_float64_reference_fails_parity():
    # the kit really compares in the chosen precision: float32 kernels are not float64 ones
    float32_only = dataclasses.replace(cartpole.SPEC, id="CartPoleMislabelled-v1", precisions=("float32",))
    float64_reference = CPUReference(
        reset=cartpole.reference.reset,
        observe=cartpole.reference.observe,
        step=lambda params, state, action, rng_states=None, real=None: cartpole.reference.step(
            params, state, action, rng_states
        ),
    )
    spec = dataclasses.replace(float32_only, reference=float64_reference)
    report = check_env(spec, backend="cpu", max_examples=20, seed=3, checks=["parity"], **EXACT)
    assert not report.passed and "reference" in report["parity"].message


# ------------------------------------------------------- float32 against float64 and gymnasium
def _pair(env_id, seed):
    """float64 and float32 builds of ``env_id`` in the same reached states (float64 warm-up)."""
    envs = {
        precision: kge.make(env_id, BATCH, backend="cpu", seed=seed, precision=precision, max_episode_steps=10**6)
        for precision in ("float64", "float32")
    }
    for env in envs.values():
        env.reset(seed=seed)
    envs["float64"].action_space.seed(seed)
    for _ in range(WARMUP_STEPS):
        envs["float64"].step(np.asarray(envs["float64"].action_space.sample()))
    state = envs["float64"].get_state()
    for env in envs.values():
        env.set_state(state)  # both step next (set_state also clears a pending reset)
    return envs


@pytest.mark.parametrize("env_id", CLASSIC)
@settings(max_examples=6)
@given(seed=st.integers(0, 2**16))
def test_float32_stays_within_the_stated_tolerance_of_float64(env_id, seed):
    envs = _pair(env_id, seed)
    alive = np.ones(BATCH, bool)  # compared until an episode ends (its next step is a reset)
    differs = False
    for _ in range(HORIZON):
        actions = np.asarray(envs["float64"].action_space.sample())
        (obs64, rewards64, terminated64, _, _), (obs32, rewards32, terminated32, _, _) = (
            env.step(actions, numpy=True) for env in envs.values()
        )
        np.testing.assert_allclose(obs32[alive], obs64[alive], rtol=FLOAT32_RTOL, atol=FLOAT32_ATOL)
        np.testing.assert_allclose(rewards32[alive], rewards64[alive], rtol=FLOAT32_RTOL, atol=FLOAT32_ATOL)
        assert np.array_equal(terminated32[alive], terminated64[alive])
        differs |= not np.array_equal(obs32[alive], obs64[alive])
        alive &= ~terminated64
    assert differs, "the float32 build gave float64's bits: it does not compute in float32"


def _gymnasium_step(gym_env, env_id, state, action):
    """gymnasium's own env stepped once from ``state`` (its float64 copy of our float32 state)."""
    names = {
        "CartPole-v1": cartpole._STATE_NAMES,
        "Pendulum-v1": ("theta", "theta_dot"),
        "MountainCar-v0": ("position", "velocity"),
        "Acrobot-v1": ("theta1", "theta2", "dtheta1", "dtheta2"),
    }[env_id]
    gym_env.state = np.array([float(state[name]) for name in names], dtype=np.float64)
    if env_id == "CartPole-v1":
        gym_env.steps_beyond_terminated = None
    obs, reward, terminated, _, _ = gym_env.step(action if env_id == "Pendulum-v1" else int(action))
    return obs, float(reward), terminated


@pytest.mark.parametrize("env_id", CLASSIC)
@settings(max_examples=3)
@given(seed=st.integers(0, 2**16))
def test_float32_stays_within_the_stated_tolerance_of_gymnasium(env_id, seed):
    env = _pair(env_id, seed)["float32"]
    gym_env = gymnasium.make(env_id).unwrapped
    gym_env.reset(seed=seed)
    alive = np.ones(BATCH, bool)
    for _ in range(HORIZON):
        before = env.get_state()
        actions = np.asarray(env.action_space.sample())
        obs, rewards, terminated, _, _ = env.step(actions, numpy=True)
        for index in np.flatnonzero(alive):
            state = {name: value[index] for name, value in before.items()}
            want_obs, want_reward, want_terminated = _gymnasium_step(gym_env, env_id, state, actions[index])
            np.testing.assert_allclose(obs[index], want_obs, rtol=FLOAT32_RTOL, atol=FLOAT32_ATOL)
            assert abs(rewards[index] - want_reward) <= FLOAT32_ATOL + FLOAT32_RTOL * abs(want_reward)
            assert bool(terminated[index]) == bool(want_terminated)
        alive &= ~terminated


# ------------------------------------------------------------ the GPU build's float64 share
FLOAT32_SHARE_BOUND = 0.1  # what is left: libdevice's cosf/sinf huge-argument reduction (two f64 multiplies)
FLOAT64_SHARE_BOUND = 0.85


@pytest.mark.gpu_compile
@pytest.mark.parametrize("env_id", CLASSIC)
def test_the_float32_gpu_build_does_almost_no_float64_arithmetic(env_id):
    from kernelgym.core import gpu_compile

    step = kge.get_spec(env_id).load_kernels("step_kernel")[0]
    body = f"{step.__module__.removeprefix('kernelgym.')}.{step.__qualname__}"
    shares = {}
    for precision in ("float64", "float32"):
        # the step launch: action check, step or reset, bookkeeping (same_step resets inside it);
        # its cpu launches only record their argument types
        with gpu_compile.typing_cpu_launches_only():
            env = kge.make(env_id, 4, backend="cpu", seed=0, autoreset_mode="same_step", precision=precision)
            env.reset(seed=0)
            env.step(np.asarray(env.action_space.sample()))
        for module in gpu_compile.imported_launchers().values():
            name = gpu_compile.launcher_name(module)
            if body not in name or not name.endswith(f"[{precision}]"):
                continue
            for argtypes in gpu_compile.launched_signatures(module):
                build = gpu_compile.compile_kernel(
                    module.cuda_launcher.py_func, argtypes, gpu_compile.TARGETS[0], name=name
                )
                assert build.ok, build.error
                shares[precision, name, str(argtypes)] = build.float64_share
    assert {precision for precision, *_ in shares} == {"float64", "float32"}, shares
    assert all(share < FLOAT32_SHARE_BOUND for (precision, *_), share in shares.items() if precision == "float32"), (
        shares
    )
    assert all(share > FLOAT64_SHARE_BOUND for (precision, *_), share in shares.items() if precision == "float64"), (
        shares
    )
