"""State the trainer sets: ``set_state`` of any subset, ``keep_episode_step``, ``keep_on_reset`` arrays.

The env is kit_fixtures/goal_walk.py: a walk to a goal the trainer writes, kept across resets.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kernelgym.envs as kge
from kernelgym.envs import StateArray
from kernelgym.envs.runtime.vector_env import KernelVectorEnv
from kernelgym.envs.testing import check_env
from kit_fixtures import goal_walk

SEED = 20261126


def test_the_kit_passes_an_env_with_a_trainer_set_array():
    report = check_env(goal_walk.SPEC, backend="cpu", max_examples=8, seed=SEED)
    assert report.passed, "\n".join(f"{r.name}: {r.message}\n{r.example}" for r in report.failures)


def test_the_kit_finds_a_reset_that_overwrites_a_trainer_set_array():
    report = check_env(goal_walk.RESET_OVERWRITES_GOAL, backend="cpu", max_examples=20, seed=SEED, checks=["parity"])
    assert report["parity"].status == "failed"
    assert "state 'goal'" in report["parity"].message


@settings(max_examples=10, deadline=None)
@given(goals=st.lists(st.integers(-5, 5), min_size=6, max_size=6), seed=st.integers(0, 2**16))
def test_a_kept_array_survives_resets_and_autoresets(goals, seed):
    env = KernelVectorEnv(goal_walk.SPEC, 6, backend="cpu", seed=seed, max_episode_steps=1)
    env.reset(seed=seed)
    np.testing.assert_array_equal(env.get_state()["goal"], 3)  # its initial value until set
    goals = np.array(goals, np.int32)
    env.set_state({"goal": goals}, keep_episode_step=True)
    env.reset()
    np.testing.assert_array_equal(env.get_state()["goal"], goals)
    for _ in range(3):  # each step ends the episode (time limit 1); the next one resets every env
        env.step(np.ones(6, np.int64))
        state = env.get_state()
        np.testing.assert_array_equal(state["goal"], goals)
        assert np.all(state["position"] != goals)


def test_set_state_takes_a_subset_and_can_keep_the_episode_counter():
    env = kge.make("CartPole-v1", 3, backend="cpu", seed=0, max_episode_steps=3)
    env.reset(seed=0)
    env.step(np.zeros(3, np.int64))
    before = env.get_state()
    env.set_state({"theta": np.float32(0.01)}, index=1, keep_episode_step=True)
    after = env.get_state()
    assert after["theta"][1] == np.float32(0.01)
    for name in before:  # nothing else changed
        mask = np.ones(3, bool)
        mask[1] = name != "theta"
        np.testing.assert_array_equal(after[name][mask], before[name][mask])
    env.step(np.zeros(3, np.int64))
    _, _, _, truncated, _ = env.step(np.zeros(3, np.int64), numpy=True)
    assert truncated.tolist() == [True, True, True]  # the counter kept running: step 3 of 3
    env.reset()
    env.step(np.zeros(3, np.int64))
    env.set_state({"x": np.float32(0.1)}, index=2)  # the default restarts env 2's counter
    env.step(np.zeros(3, np.int64))
    _, _, _, truncated, _ = env.step(np.zeros(3, np.int64), numpy=True)
    assert truncated.tolist() == [True, True, False]


def test_a_partial_state_does_not_start_an_env():
    env = kge.make("CartPole-v1", 2, backend="cpu", seed=0)
    env.set_state({"x": np.zeros(2, np.float32)})
    with pytest.raises(RuntimeError, match="step\\(\\) before reset\\(\\)"):
        env.step(np.zeros(2, np.int64))
    with pytest.raises(TypeError, match="keep_episode_step: expected True or False"):
        env.set_state({"x": np.zeros(2, np.float32)}, keep_episode_step=1)


def test_keep_on_reset_excludes_restore_on_reset():
    with pytest.raises(ValueError, match="keep_on_reset and restore_on_reset exclude each other"):
        StateArray("goal", np.int32, keep_on_reset=True, restore_on_reset=True)
