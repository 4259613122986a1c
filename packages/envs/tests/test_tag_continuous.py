"""TagContinuous: the kernels against the sequential reference, WarpDrive's rules, cpu == sim.

Rollouts start from the envs' random starts, which the reference draws exactly from
the same RNG streams, and use a wide tagging distance and several taggers and runners, so that one tagger
often tags several runners in a step: its reward and the runners-left counter,
written through ``atomic_add``, must match the runner-by-runner reference.
"""

import dataclasses
import functools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tag_kernel_batch
from kernelgym.core import rng
from kernelgym.envs.tag import continuous
from kernelgym.envs.tag.continuous import SPEC, TagContinuousParams
from tag_kernel_batch import KernelBatch

REFERENCE = continuous.REFERENCE
NAMES = [array.name for array in SPEC.state]
FLOAT_NAMES = ("loc_x", "loc_y", "speed", "direction", "acceleration")
CROWDED = TagContinuousParams(
    num_taggers=3,
    num_runners=6,
    grid_length=4.0,
    episode_length=15,
    tagging_distance=0.3,
    edge_hit_penalty=-0.5,
    step_penalty_for_tagger=-0.01,
    step_reward_for_runner=0.02,
)

ONE_ON_ONE = TagContinuousParams(num_taggers=1, num_runners=1, grid_length=10.0, edge_hit_penalty=-0.5)
TIES = TagContinuousParams(
    num_taggers=2,
    num_runners=38,
    grid_length=4.0,
    use_full_observation=False,
    num_other_agents_observed=6,
    tagging_distance=0.0,
)  # no tags: in_game stays (the grid-neighbour tests below)
# Configurations with 1 to 3 taggers, 1 to 6 runners, full and partial observations, runners
# that leave the game or stay, slow and fast runners, each with (num_steps) steps. Each params
# field is compiled into the kernels as a constant, so every configuration is a build of its
# own: each keeps the fields the observation kernels read (the costliest to compile) from a
# configuration another test here builds (CROWDED, ONE_ON_ONE, TIES), so only its move, tag and
# start kernels are new.
RANDOM_CONFIGURATIONS = {
    # episodes of 15 steps: truncated at step 15 and reset (NEXT_STEP) at step 16
    "three taggers, one slow runner": (dataclasses.replace(CROWDED, num_runners=1, skill_level_runner=0.2), 17),
    "one tagger, fast runners that stay in the game": (
        dataclasses.replace(
            ONE_ON_ONE,
            num_runners=4,
            tagging_distance=0.2,
            skill_level_runner=1.4,
            runner_exits_game_after_tagged=False,
        ),
        12,
    ),
    # the 6 nearest of 7 others in the game, fewer as runners leave (zero blocks)
    "two taggers, partial observation": (
        dataclasses.replace(TIES, num_runners=6, tagging_distance=0.2, skill_level_runner=2.0, edge_hit_penalty=-0.1),
        12,
    ),
}

# ``num_envs`` TagContinuous envs run by the runtime
Batch = functools.partial(KernelBatch, continuous)


def env_state(out, env):
    return {name: out[name][env] for name in NAMES}


def random_actions(generator, params, num_envs):
    acceleration = generator.integers(0, params.num_acceleration_levels + 1, size=(num_envs, params.num_agents))
    turn = generator.integers(0, params.num_turn_levels + 1, size=(num_envs, params.num_agents))
    return np.stack([acceleration, turn], axis=-1)


def rollout_against_reference(backend, params, num_envs, num_steps, seed):
    """Step envs from their random starts with random actions through NEXT_STEP resets,
    comparing every env with the reference after every step. Returns the runners tagged."""
    return tag_kernel_batch.rollout_against_reference(
        continuous,
        backend,
        params,
        num_envs,
        num_steps,
        seed,
        lambda generator, num_envs: random_actions(generator, params, num_envs),
    )


def test_crowded_rollout_matches_the_sequential_reference_on_cpu():
    tags = 0
    for seed in range(4):
        tags += rollout_against_reference("cpu", CROWDED, num_envs=12, num_steps=15, seed=seed)
    assert tags > 40  # many runners are tagged, often several by one tagger in one step


@pytest.mark.parametrize("configuration", RANDOM_CONFIGURATIONS)
@settings(max_examples=4)
@given(seed=st.integers(0, 2**16))
def test_random_configurations_match_the_reference_on_cpu(configuration, seed):
    params, num_steps = RANDOM_CONFIGURATIONS[configuration]
    rollout_against_reference("cpu", params, num_envs=4, num_steps=num_steps, seed=seed)


def test_dynamics_follow_warpdrive():
    params = ONE_ON_ONE
    batch = Batch("cpu", params, num_envs=1)
    start = {
        "loc_x": np.float32([5.0, 9.5]),
        "loc_y": np.float32([5.0, 5.0]),
        "speed": np.float32([0, 0]),
        "direction": np.float32([0, 0]),
        "acceleration": np.float32([0, 0]),
        "in_game": np.ones(2, bool),
        "timestep": np.int32(0),
        "runners_left": np.int32(1),
    }
    batch.set_states([start | continuous.reference_grid(params, start)])  # the grid: scratch the step rebuilds
    # acceleration index 10 is +1.0; turn index 0 is no turn: both speed up along +x
    out = batch.step([[[10, 0], [10, 0]]])
    assert out["speed"][0].tolist() == [1.0, 1.0] and out["acceleration"][0].tolist() == [0.0, 0.0]
    assert out["loc_x"][0].tolist() == [6.0, 10.0]
    np.testing.assert_allclose(out["rewards"][0], [0.0, -0.5])  # the runner crossed the edge
    # turn index 10 is +pi/2: heading +y; acceleration index 1 is -1.0 -> speed 0, acceleration zeroed
    out = batch.step([[[0, 10], [1, 0]]])
    np.testing.assert_allclose(out["direction"][0], [math.pi / 2, 0.0], rtol=1e-6)
    np.testing.assert_allclose(out["loc_y"][0], [6.0, 5.0], rtol=1e-6)
    assert out["speed"][0, 1] == 0.0 and out["acceleration"][0, 1] == 0.0


def test_a_tag_rewards_the_nearest_tagger_and_removes_the_runner():
    params = TagContinuousParams(num_taggers=2, num_runners=3, grid_length=10.0, tagging_distance=0.05)
    batch = Batch("cpu", params, num_envs=1)
    zeros = np.zeros(5, np.float32)
    # runners 2 and 3 sit next to tagger 0, runner 4 is far away; tagger 1 is farther from both
    state = {
        "loc_x": np.float32([1.0, 1.6, 1.2, 1.1, 8.0]),
        "loc_y": np.float32([1, 1, 1, 1, 8]),
        "speed": zeros,
        "direction": zeros,
        "acceleration": zeros,
        "in_game": np.ones(5, bool),
        "timestep": np.int32(0),
        "runners_left": np.int32(3),
    }
    state |= continuous.reference_grid(params, state)  # scratch the step rebuilds
    batch.set_states([state])
    out = batch.step(np.zeros((1, 5, 2), np.int64))
    np.testing.assert_allclose(out["rewards"][0], [2.0, 0.0, -1.0, -1.0, 0.0])
    assert out["in_game"][0].tolist() == [True, True, False, False, True]
    assert out["runners_left"][0] == 1 and not out["terminated"][0]


def test_partial_observation_lists_the_nearest_agents_in_the_game():
    # TIES' observation (2 taggers, the 6 nearest, grid 4) with 7 runners: its build's kernels
    params = dataclasses.replace(TIES, num_runners=7)
    zeros = np.zeros(9, np.float32)
    state = {
        "loc_x": np.float32([0.0, 3.0, 1.0, 2.0, 0.5, 1.5, 2.5, 3.5, 0.25]),
        "loc_y": zeros,
        "speed": zeros,
        "direction": zeros,
        "acceleration": zeros,
        "in_game": np.array([True, True, False, True, True, True, True, True, True]),
        "timestep": np.int32(4),
        "runners_left": np.int32(6),
    }
    obs = REFERENCE.observe(params, state)
    assert obs.shape == (9, 7 * 7 + 1) and SPEC.resolve(params).observation_space.shape == (50,)
    diagonal = 4.0 * math.sqrt(2)
    # agent 0 sees agents 8, 4, 5, 3, 6, 1 (distances 0.25 .. 3), nearest first; agent 2 is
    # out of the game and agent 7 (3.5) is the seventh nearest
    np.testing.assert_allclose(obs[0, 7::7][:6], np.array([0.25, 0.5, 1.5, 2.0, 2.5, 3.0]) / diagonal, rtol=1e-6)
    np.testing.assert_array_equal(obs[0, 12::7][:6], [0, 0, 0, 0, 0, 1])  # types: agent 1 is a tagger
    np.testing.assert_allclose(obs[0, -1], 4 / 100)
    batch = Batch("cpu", params, num_envs=1)
    batch.set_states([state | continuous.reference_grid(params, state)])
    out = batch.step(np.zeros((1, 9, 2), np.int64))
    np.testing.assert_allclose(out["obs"][0], REFERENCE.observe(params, env_state(out, 0)), rtol=1e-6, atol=1e-7)


def test_reset_draws_positions_in_the_square_and_quarter_turn_headings():
    # the defaults (1 tagger, 10 runners) over 192 envs: about 2,000 draws per axis, and the
    # same build (constants, parallel cpu launcher) as the kit's fast_math check of TagContinuous
    params = TagContinuousParams()
    out = Batch("cpu", params, num_envs=192, seed=3).host()
    for axis in ("loc_x", "loc_y"):
        assert np.all((out[axis] >= 0) & (out[axis] <= 10.0))
        assert out[axis].min() < 0.1 and out[axis].max() > 9.9 and abs(out[axis].mean() - 5.0) < 0.2
    np.testing.assert_allclose(np.unique(out["direction"]), np.float32([0, np.pi / 2, np.pi, 3 * np.pi / 2]))
    assert np.all(out["speed"] == 0) and np.all(out["in_game"]) and np.all(out["runners_left"] == 10)
    # different envs draw different starts from their own streams
    assert not np.array_equal(out["loc_x"][0], out["loc_x"][1])
    # one stream per (env, agent): (num_envs, num_agents, 2), deterministic from the seed
    streams = rng.seed_agent_streams(3, 192, params.num_agents)
    for env in range(3):
        # the reference draws the very same start from the env's agents' streams
        start = REFERENCE.reset(params, streams[env].copy())
        for name in NAMES:
            np.testing.assert_array_equal(out[name][env], start[name], err_msg=name)
        np.testing.assert_allclose(out["obs"][env], REFERENCE.observe(params, env_state(out, env)), atol=1e-7)


@settings(max_examples=20)
@given(SPEC.load("state_strategy")(CROWDED), st.integers(0, 2**16))
def test_invariants_hold_after_a_step_from_any_state(state, seed):
    continuous.check_invariants(CROWDED, state)
    actions = random_actions(np.random.default_rng(seed), CROWDED, 1)[0]
    new_state, reward, terminated = REFERENCE.step(CROWDED, state, actions)
    continuous.check_invariants(CROWDED, new_state)
    assert terminated == (new_state["runners_left"] == 0)


def test_spec_declares_agents_spaces_and_limits():
    resolved = SPEC.resolve()
    assert resolved.num_agents == 11 and resolved.max_episode_steps == 100
    assert resolved.observation_space.shape == (7 * 11 + 1,)
    assert resolved.action_space.nvec.tolist() == [11, 11]
    partial = SPEC.resolve(TagContinuousParams(use_full_observation=False, num_other_agents_observed=2))
    assert partial.observation_space.shape == (22,)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"num_runners": 0}, "num_runners: expected >= 1, got 0"),
        ({"edge_hit_penalty": 0.5}, "edge_hit_penalty: expected <= 0, got 0.5"),
        ({"tagging_distance": 2.0}, r"tagging_distance: expected in \[0, 1\], got 2.0"),
        (
            {"use_full_observation": False, "num_other_agents_observed": 11},
            r"num_other_agents_observed: expected in \[1, num_agents - 1\], got 11",
        ),
    ],
)
def test_bad_params_name_the_field(overrides, message):
    with pytest.raises(ValueError, match=message):
        TagContinuousParams(**overrides)


@pytest.mark.sim
def test_crowded_rollout_matches_the_sequential_reference_in_the_simulator():
    assert rollout_against_reference("sim", CROWDED, num_envs=3, num_steps=6, seed=1) > 3


@pytest.mark.sim
def test_cpu_and_simulator_agree_bit_for_bit():
    # episodes of 3 steps: every env is truncated and reset (NEXT_STEP) on the way
    params = dataclasses.replace(CROWDED, use_full_observation=False, num_other_agents_observed=3, episode_length=3)
    cpu, sim = Batch("cpu", params, 3, seed=9), Batch("sim", params, 3, seed=9)
    generator = np.random.default_rng(9)
    for t in range(6):
        actions = random_actions(generator, params, 3)
        cpu_out, sim_out = cpu.step(actions), sim.step(actions)
        for name in cpu_out:
            np.testing.assert_array_equal(cpu_out[name], sim_out[name], err_msg=f"step {t}: {name}")


@pytest.mark.gpu
def test_crowded_rollout_matches_the_sequential_reference_on_a_gpu():
    # real concurrent threads: a non-atomic update of a shared reward or counter loses tags
    assert rollout_against_reference("cuda", CROWDED, num_envs=64, num_steps=15, seed=4) > 40


# ------------------------------------------------- grid neighbours against all pairs
@functools.cache
def ties_batch(backend, num_other_agents_observed):
    params = dataclasses.replace(TIES, num_other_agents_observed=num_other_agents_observed)
    return params, Batch(backend, params, num_envs=2)


def tied_states(params):
    """States of agents standing still on a lattice of step 1/4 (edges included): many equal
    distances, so the order among equals (lower index first) decides the observation."""
    n = params.num_agents
    lattice = st.integers(0, int(params.grid_length * 4)).map(lambda k: np.float32(k / 4))
    positions = st.lists(lattice, min_size=n, max_size=n).map(lambda xs: np.array(xs, np.float32))
    outs = st.lists(st.booleans(), min_size=params.num_runners, max_size=params.num_runners)

    def build(x, y, out):
        zeros = np.zeros(n, np.float32)
        in_game = np.concatenate([np.ones(params.num_taggers, bool), ~np.array(out)])
        state = {
            "loc_x": x,
            "loc_y": y,
            "speed": zeros,
            "direction": zeros,
            "acceleration": zeros,
            "in_game": in_game,
            "timestep": np.int32(0),
            "runners_left": np.int32(in_game[params.num_taggers :].sum()),
        }
        return state | {
            "cell_start": np.zeros(params.grid_side**2 + 2, np.int32),
            "cell_agents": np.full(n, -1, np.int32),
        }

    return st.builds(build, positions, positions, outs).filter(lambda s: s["runners_left"] > 0)


def check_grid_equals_all_pairs(backend, num_other_agents_observed, states):
    params, batch = ties_batch(backend, num_other_agents_observed)
    assert params.grid_neighbours and params.grid_side > 1
    batch.set_states(states)
    out = batch.step(np.zeros((2, params.num_agents, 2), np.int64))  # no-ops: nobody moves
    for env, state in enumerate(states):
        expected = REFERENCE.observe(params, env_state(out, env))  # the all-pairs search
        np.testing.assert_array_equal(out["obs"][env].view(np.int32), expected.view(np.int32))
        assert np.array_equal(out["loc_x"][env], state["loc_x"]) and np.array_equal(
            out["in_game"][env], state["in_game"]
        )
        grid = continuous.reference_grid(params, env_state(out, env))
        for name in ("cell_start", "cell_agents"):
            np.testing.assert_array_equal(out[name][env], grid[name])


@pytest.mark.parametrize("num_other_agents_observed", [1, 6, 39])
@given(st.data())
@settings(max_examples=25, deadline=None)
def test_grid_neighbours_equal_all_pairs_bit_for_bit_with_ties_on_cpu(num_other_agents_observed, data):
    params, _ = ties_batch("cpu", num_other_agents_observed)
    check_grid_equals_all_pairs("cpu", num_other_agents_observed, [data.draw(tied_states(params)) for _ in range(2)])


@pytest.mark.sim
@given(st.data())
@settings(max_examples=8, deadline=None)
def test_grid_neighbours_equal_all_pairs_bit_for_bit_with_ties_on_sim(data):
    params, _ = ties_batch("sim", 6)
    check_grid_equals_all_pairs("sim", 6, [data.draw(tied_states(params)) for _ in range(2)])
