"""TagGridWorld: the kernels against the sequential reference, WarpDrive's rules, cpu == sim.

The rollout tests crowd many taggers and runners on a tiny grid so that several
runners of one env are tagged in the same step: the shared counters and rewards
written through ``atomic_add`` must match the agent-by-agent reference exactly.
"""

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tag_kernel_batch
from kernelgym.envs.tag import gridworld
from kernelgym.envs.tag.gridworld import SPEC, TagGridWorldParams
from tag_kernel_batch import KernelBatch

REFERENCE = gridworld.REFERENCE
CROWDED = TagGridWorldParams(num_taggers=5, num_runners=4, grid_length=2, episode_length=30)


# ``num_envs`` TagGridWorld envs run by the runtime
Batch = functools.partial(KernelBatch, gridworld)


def random_actions(params):
    return lambda generator, num_envs: generator.integers(0, 5, size=(num_envs, params.num_agents))


def rollout_against_reference(backend, params, num_envs, num_steps, seed):
    """Step envs with random actions through NEXT_STEP resets, comparing every env with the
    reference after every step. Returns the runners tagged."""
    return tag_kernel_batch.rollout_against_reference(
        gridworld, backend, params, num_envs, num_steps, seed, random_actions(params)
    )


def test_crowded_rollout_matches_the_sequential_reference_on_cpu():
    tags = rollout_against_reference("cpu", CROWDED, num_envs=16, num_steps=60, seed=1)
    assert tags > 50  # the scenario really tags runners, often several at once


# Each params field is compiled into the kernels as a constant: every configuration is a build
# of its own. 1 to 6 taggers, 1 to 5 runners, grids of side 1 to 6, episodes of 3 to 100 steps
# (those of 3 and 12 truncated and reset within the 20 steps); all but the last are
# configurations other tests here build (test_make_gives..., test_warpdrive_rules...), so
# they compile nothing new.
RANDOM_CONFIGURATIONS = {
    "the taggers start on the runner's cell": TagGridWorldParams(num_taggers=2, grid_length=1, episode_length=3),
    "one tagger, one runner": TagGridWorldParams(num_taggers=1, grid_length=6, episode_length=3),
    "two taggers, one runner": TagGridWorldParams(num_taggers=2, grid_length=4),
    "six taggers, five runners": TagGridWorldParams(num_taggers=6, num_runners=5, grid_length=3, episode_length=12),
}


@pytest.mark.parametrize("configuration", RANDOM_CONFIGURATIONS)
@settings(max_examples=3)
@given(seed=st.integers(0, 2**16))
def test_random_configurations_match_the_reference_on_cpu(configuration, seed):
    rollout_against_reference("cpu", RANDOM_CONFIGURATIONS[configuration], num_envs=5, num_steps=20, seed=seed)


def test_warpdrive_rules_for_a_single_runner():
    params = TagGridWorldParams(num_taggers=2, grid_length=4)
    batch = Batch("cpu", params, num_envs=1)
    out = batch.host()
    assert out["loc_x"][0].tolist() == [2, 2, 0] and out["loc_y"][0].tolist() == [2, 2, 0]
    # the runner walks into the wall: it pays the wall penalty and earns the step cost
    out = batch.step([[0, 2, 2]])
    np.testing.assert_allclose(out["rewards"][0], [-0.01, -0.01, 0.01 - 0.1], rtol=1e-6)
    assert out["loc_x"][0].tolist() == [2, 1, 0] and not out["terminated"][0]
    # tagger 1 moves (1, 2) -> (0, 2), (0, 1): no tag yet; the runner moves up to (0, 1): tag
    batch.step([[0, 2, 0]])
    out = batch.step([[0, 4, 3]])
    assert out["loc_x"][0].tolist() == [2, 0, 0] and out["loc_y"][0].tolist() == [2, 1, 1]
    np.testing.assert_allclose(out["rewards"][0], [10.0, 10.0, -2.0])
    assert out["terminated"][0] and out["runners_left"][0] == 0
    obs = out["obs"][0]
    np.testing.assert_allclose(obs[:, 6:9], [[0.0, 0.0, -1.0]] * 3)  # the tagged runner's type is -1
    np.testing.assert_allclose(obs[:, 9:12], np.eye(3))
    np.testing.assert_allclose(obs[:, 12], 3 / 100)


def test_observation_has_warpdrives_layout():
    params = TagGridWorldParams(num_taggers=3, grid_length=10)
    obs = Batch("cpu", params, num_envs=2).host()["obs"]
    assert obs.shape == (2, 4, 17)
    np.testing.assert_allclose(obs[0, 0, :4], [0.5, 0.5, 0.5, 0.0])  # x / grid_length
    np.testing.assert_allclose(obs[0, 0, 8:12], [0.0, 0.0, 0.0, 1.0])  # types
    assert SPEC.resolve(params).observation_space.contains(obs[0, 0])


def test_spec_declares_agents_limits_and_invariants():
    resolved = SPEC.resolve(TagGridWorldParams(num_taggers=4, num_runners=2, episode_length=40))
    assert resolved.num_agents == 6 and resolved.max_episode_steps == 40
    assert resolved.observation_space.shape == (25,)
    state = REFERENCE.reset(CROWDED)
    gridworld.check_invariants(CROWDED, state)
    with pytest.raises(AssertionError, match="off the grid"):
        gridworld.check_invariants(CROWDED, state | {"loc_x": state["loc_x"] + 3})
    with pytest.raises(AssertionError, match="runners_left"):
        gridworld.check_invariants(CROWDED, state | {"runners_left": np.int32(0)})


@settings(max_examples=20)
@given(SPEC.load("state_strategy")(CROWDED), st.lists(st.integers(0, 4), min_size=9, max_size=9))
def test_invariants_hold_after_a_step_from_any_state(state, actions):
    gridworld.check_invariants(CROWDED, state)
    new_state, reward, terminated = REFERENCE.step(CROWDED, state, actions)
    gridworld.check_invariants(CROWDED, new_state)
    assert terminated == (new_state["runners_left"] == 0)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("num_taggers", 0, "num_taggers: expected an int >= 1, got 0"),
        ("num_runners", 0, "num_runners: expected an int >= 1, got 0"),
        ("grid_length", 0, "grid_length: expected an int >= 1, got 0"),
    ],
)
def test_bad_params_name_the_field(field, value, message):
    with pytest.raises(ValueError, match=message):
        TagGridWorldParams(**{field: value})


@pytest.mark.sim
def test_crowded_rollout_matches_the_sequential_reference_in_the_simulator():
    # the simulator runs each env's agents as concurrent threads: lost atomic updates show here
    assert rollout_against_reference("sim", CROWDED, num_envs=3, num_steps=12, seed=2) > 5


@pytest.mark.sim
def test_cpu_and_simulator_agree_bit_for_bit():
    params = TagGridWorldParams(num_taggers=4, num_runners=3, grid_length=3)
    cpu, sim = Batch("cpu", params, 4, seed=5), Batch("sim", params, 4, seed=5)
    generator = np.random.default_rng(5)
    for _ in range(8):
        actions = generator.integers(0, 5, size=(4, 7))
        cpu_out, sim_out = cpu.step(actions), sim.step(actions)
        for name in cpu_out:
            np.testing.assert_array_equal(cpu_out[name], sim_out[name], err_msg=name)


def test_make_gives_multi_agent_views_and_separates_terminated_from_truncated():
    import kernelgym.envs as kge

    # grid_length 1: the taggers start on the runner's cell, so staying put tags it at once
    env = kge.make("TagGridWorld-v0", num_envs=2, backend="cpu", seed=0, num_taggers=2, grid_length=1, episode_length=3)
    obs, _ = env.reset(seed=0)
    assert tuple(obs.shape) == (2, 3, 13) and env.num_agents == 3
    obs, rewards, terminated, truncated, _ = env.step(np.zeros((2, 3), np.int64), numpy=True)
    assert rewards.shape == (2, 3) and terminated.all() and not truncated.any()
    np.testing.assert_allclose(rewards, [[10.0, 10.0, -2.0]] * 2)
    # a runner that is never caught: the episode is truncated, not terminated, at episode_length
    env = kge.make("TagGridWorld-v0", num_envs=2, backend="cpu", seed=0, num_taggers=1, grid_length=6, episode_length=3)
    env.reset(seed=0)
    for step in range(1, 4):
        _, _, terminated, truncated, _ = env.step(np.zeros((2, 2), np.int64), numpy=True)
        assert not terminated.any() and truncated.all() == (step == 3)


@pytest.mark.gpu
def test_crowded_rollout_matches_the_sequential_reference_on_a_gpu():
    # real concurrent threads: a non-atomic counter update loses tags here
    assert rollout_against_reference("cuda", CROWDED, num_envs=64, num_steps=60, seed=3) > 200


# ------------------------------------------------------- partial observation (WarpDrive's)
# several runners on a small grid: ties and runners tagged out happen often
PARTIAL = TagGridWorldParams(num_taggers=4, num_runners=3, grid_length=3, episode_length=12, use_full_observation=False)


def numpy_partial_observation(params, state):
    """The partial observation by a plain numpy nearest search (argmin takes the lowest id of ties)."""
    xy = np.stack([state["loc_x"], state["loc_y"]], axis=1).astype(np.int64)
    taggers, in_game = params.num_taggers, np.asarray(state["in_game"])
    squared = ((xy[:, None, :] - xy[None, :, :]) ** 2).sum(axis=-1)
    obs = np.zeros((params.num_agents, 6), np.float32)
    for agent in range(params.num_agents):
        if agent < taggers:
            runners = np.arange(taggers, params.num_agents)
            candidates = runners[in_game[taggers:]] if in_game[taggers:].any() else runners
        else:
            candidates = np.arange(taggers)
        target = candidates[np.argmin(squared[agent, candidates])]
        obs[agent] = [
            *(xy[agent] / params.grid_length),
            *(xy[target] / params.grid_length),
            float(agent >= taggers),
            int(state["timestep"]) / params.episode_length,
        ]
    return obs


@settings(max_examples=40)
@given(SPEC.load("state_strategy")(PARTIAL))
def test_partial_observation_is_the_nearest_search_of_plain_numpy(state):
    np.testing.assert_array_equal(REFERENCE.observe(PARTIAL, state), numpy_partial_observation(PARTIAL, state))


def test_partial_observation_ties_go_to_the_lowest_id_and_no_runner_left_shows_the_tagged_one():
    params = TagGridWorldParams(num_taggers=3, num_runners=2, grid_length=8, use_full_observation=False)
    state = REFERENCE.reset(params) | {
        "loc_x": np.int32([4, 0, 8, 2, 6]),
        "loc_y": np.int32([4, 0, 0, 4, 4]),
        "timestep": np.int32(3),
    }
    obs = REFERENCE.observe(params, state)
    # tagger 0 at (4, 4) is 2 cells from both runners: the lower id, runner 3 at (2, 4)
    np.testing.assert_array_equal(obs[0], np.float32([0.5, 0.5, 0.25, 0.5, 0.0, 0.03]))
    # runner 4 at (6, 4): tagger 0 (distance 4) is nearer than tagger 2 at (8, 0) (distance 20)
    np.testing.assert_array_equal(obs[4], np.float32([0.75, 0.5, 0.5, 0.5, 1.0, 0.03]))
    # runner 3 out: tagger 0 sees runner 4; both out: the nearest tagged-out runner, 3 again
    one_out = state | {"in_game": np.array([True, True, True, False, True]), "runners_left": np.int32(1)}
    np.testing.assert_array_equal(REFERENCE.observe(params, one_out)[0, 2:4], np.float32([0.75, 0.5]))
    all_out = state | {"in_game": np.array([True, True, True, False, False]), "runners_left": np.int32(0)}
    np.testing.assert_array_equal(REFERENCE.observe(params, all_out)[0, 2:4], np.float32([0.25, 0.5]))


def test_partial_observation_space_and_warpdrives_start():
    resolved = SPEC.resolve(PARTIAL)
    assert resolved.observation_space.shape == (6,) and PARTIAL.observation_size == 6
    params = TagGridWorldParams(num_taggers=2, grid_length=4, use_full_observation=False)
    obs = Batch("cpu", params, num_envs=2).host()["obs"]
    assert obs.shape == (2, 3, 6)
    # taggers at the centre see the runner at the corner; the runner sees tagger 0
    np.testing.assert_array_equal(obs[1], np.float32([[0.5, 0.5, 0, 0, 0, 0]] * 2 + [[0, 0, 0.5, 0.5, 1, 0]]))
    assert all(SPEC.resolve(params).observation_space.contains(row) for row in obs[0])


def test_partial_rollout_matches_the_sequential_reference_on_cpu():
    assert rollout_against_reference("cpu", PARTIAL, num_envs=8, num_steps=30, seed=4) > 10


def test_use_full_observation_must_be_a_bool():
    with pytest.raises(ValueError, match=r"use_full_observation: expected a bool, got 0"):
        TagGridWorldParams(use_full_observation=0)


@pytest.mark.sim
def test_partial_rollout_matches_the_sequential_reference_in_the_simulator():
    assert rollout_against_reference("sim", PARTIAL, num_envs=2, num_steps=10, seed=6) > 0
