"""MountainCar-v0: one-step parity with gymnasium, reset bounds, invariants, cpu == sim."""

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgym.core import Branch, rng, to_numpy
from kernelgym.core.arrays import to_backend
from kernelgym.envs.classic import mountain_car
from kernelgym.envs.classic.mountain_car import SPEC, MountainCarParams
from kernelgym.envs.runtime.autoreset import clear_step_outputs
from kernelgym.envs.runtime.names import bind_env_programs

PARAMS = SPEC.params
NAMES = [array.name for array in SPEC.state]
STATES = SPEC.load("state_strategy")(PARAMS)
# a batch of (state, action); the strategy covers the walls and the goal
TRANSITIONS = st.lists(st.tuples(STATES, st.integers(0, 2)), min_size=1, max_size=16)


def run_step(backend, position, velocity, action, reset_mask=None, seed=0):
    """One launch of the step kernel on ``backend``; returns host copies of everything."""
    n = len(position)
    arrays = {
        "actions": np.asarray(action, np.int64),
        "rng_states": rng.seed_streams(seed, n),
        "reset_mask": np.zeros(n, bool) if reset_mask is None else reset_mask,
        "obs": np.zeros((n, 2), np.float32),
        "rewards": np.zeros(n, np.float32),
        "terminated": np.zeros(n, bool),
        "position": np.asarray(position, np.float32),
        "velocity": np.asarray(velocity, np.float32),
    }
    device = {name: to_backend(value, backend) for name, value in arrays.items()}
    # what the runtime composes: the masked envs reset (reward 0, flags cleared), the others step
    device.update(_reward_rows=device["rewards"].reshape(n, 1), _truncated=to_backend(np.zeros(n, bool), backend))
    program = Branch(
        "reset_mask",
        then=[*SPEC.load_kernels("reset_kernel"), clear_step_outputs],
        otherwise=SPEC.load_kernels("step_kernel"),
    )
    bind_env_programs(SPEC, [[program]], device, backend)()
    return {name: to_numpy(value).copy() for name, value in device.items()}


def unzip(transitions):
    return [s["position"] for s, _ in transitions], [s["velocity"] for s, _ in transitions], [a for _, a in transitions]


@settings(max_examples=40)
@given(TRANSITIONS)
def test_one_step_matches_gymnasium_and_the_reference(transitions):
    out = run_step("cpu", *unzip(transitions))
    env = gym.make("MountainCar-v0").unwrapped
    env.reset(seed=0)
    for k, (state, action) in enumerate(transitions):
        env.state = np.array([state["position"], state["velocity"]], dtype=np.float64)
        g_obs, g_reward, g_terminated, g_truncated, _ = env.step(action)
        np.testing.assert_allclose(out["obs"][k], g_obs, rtol=1e-6, atol=1e-7)
        assert out["rewards"][k] == g_reward == -1.0
        # same float64 arithmetic as gymnasium: the goal test agrees exactly
        assert out["terminated"][k] == g_terminated
        r_state, r_reward, r_terminated = mountain_car.REFERENCE.step(PARAMS, state, action)
        np.testing.assert_array_equal(mountain_car.REFERENCE.observe(PARAMS, r_state), out["obs"][k])
        assert (r_reward, r_terminated) == (g_reward, g_terminated)


def test_the_left_wall_stops_the_car_and_the_flag_ends_the_episode():
    out = run_step("cpu", [-1.19, 0.49, 0.45], [-0.05, 0.02, 0.0], [0, 2, 2])
    assert out["position"][0] == np.float32(-1.2) and out["velocity"][0] == 0.0
    assert out["terminated"].tolist() == [False, True, False]


def test_reset_distribution_has_gymnasiums_bounds():
    n = 4000
    out = run_step("cpu", np.full(n, 0.3), np.full(n, 0.05), np.zeros(n), reset_mask=np.ones(n, bool), seed=5)
    assert np.all((out["position"] >= np.float32(-0.6)) & (out["position"] <= np.float32(-0.4)))
    assert out["position"].min() < -0.59 and out["position"].max() > -0.41 and abs(out["position"].mean() + 0.5) < 0.01
    np.testing.assert_array_equal(out["velocity"], 0.0)
    np.testing.assert_array_equal(out["obs"], np.stack([out["position"], out["velocity"]], axis=1))
    np.testing.assert_array_equal(out["rewards"], 0.0)
    assert not out["terminated"].any()
    env = gym.make("MountainCar-v0").unwrapped
    gym_obs = np.array([env.reset(seed=seed)[0] for seed in range(200)])
    assert np.all((gym_obs[:, 0] >= -0.6) & (gym_obs[:, 0] <= -0.4)) and np.all(gym_obs[:, 1] == 0)


@settings(max_examples=25)
@given(STATES, st.integers(0, 2))
def test_invariants_hold_after_a_step(state, action):
    out = run_step("cpu", [state["position"]], [state["velocity"]], [action])
    SPEC.load("invariants")(PARAMS, {name: out[name][0] for name in NAMES})
    assert SPEC.resolve().observation_space.contains(out["obs"][0])


def test_invariant_check_catches_a_car_off_the_track():
    with pytest.raises(AssertionError, match="position"):
        mountain_car.check_invariants(PARAMS, {"position": np.float32(0.7), "velocity": np.float32(0)})


def test_spec_matches_gymnasium():
    resolved = SPEC.resolve()
    env = gym.make("MountainCar-v0")
    assert resolved.max_episode_steps == env.spec.max_episode_steps == 200
    assert resolved.observation_space == env.observation_space
    assert resolved.action_space == env.action_space


def test_bad_params_name_the_field():
    with pytest.raises(
        ValueError, match=r"MountainCarParams goal_position: expected a value in \(-1.2, 0.6\], got 2.0"
    ):
        MountainCarParams(goal_position=2.0)


@pytest.mark.sim
@settings(max_examples=5)
@given(TRANSITIONS)
def test_cpu_and_simulator_agree_bit_for_bit(transitions):
    mask = np.arange(len(transitions)) % 3 == 0  # some envs reset, the others step
    cpu = run_step("cpu", *unzip(transitions), reset_mask=mask, seed=3)
    sim = run_step("sim", *unzip(transitions), reset_mask=mask, seed=3)
    for name in cpu:
        np.testing.assert_array_equal(cpu[name], sim[name], err_msg=name)
