"""Dict and Tuple observation spaces: leaf names, buffers, the kit, MultiBinary actions.

The env with every leaf kind is kit_fixtures/dict_walk.py (nested Dict and Tuple,
Box/Discrete/MultiBinary leaves of five dtypes, MultiBinary actions).
"""

import dataclasses
import functools

import numpy as np
import pytest
import torch
from gymnasium import spaces
from gymnasium.vector.utils import batch_space
from hypothesis import given, settings
from hypothesis import strategies as st

import kernelgym.envs as kge
from kernelgym.core import BindingError, env_kernel, rng, to_numpy
from kernelgym.envs.observations import build_tree, check_observation_space, leaf_arrays, leaf_name, leaves
from kernelgym.envs.runtime import KernelVectorEnv
from kernelgym.envs.runtime.buffers import Buffers
from kernelgym.envs.testing import check_env, check_names, format_report
from kit_fixtures import dict_walk, walk

KEYS = ["a", "b", "a_b", "b_0", "0", "x-y", "class"]
LEAVES = st.sampled_from(
    [
        spaces.Box(-1.0, 1.0, (2,), np.float32),
        spaces.Box(0, 255, (1, 2, 2), np.uint8),
        spaces.Discrete(5),
        spaces.MultiBinary(3),
        spaces.Box(-3, 3, (), np.int16),
    ]
)


def _spaces(depth=2):
    if depth == 0:
        return LEAVES
    child = st.one_of(LEAVES, st.deferred(lambda: _spaces(depth - 1)))
    return st.one_of(
        st.dictionaries(st.sampled_from(KEYS), child, min_size=1, max_size=3).map(spaces.Dict),
        st.lists(child, min_size=1, max_size=3).map(lambda items: spaces.Tuple(tuple(items))),
    )


def _spec(observation_space, **changes):
    return dataclasses.replace(walk.SPEC, observation_space=observation_space, **changes)


@settings(max_examples=60, deadline=None)
@given(space=_spaces(), num_envs=st.integers(1, 4))
def test_leaf_names_are_unique_identifiers_and_buffers_match_the_batched_space(space, num_envs):
    found = leaves(space)
    names = [leaf.name for leaf in found]
    clash = len(set(names)) != len(names)
    if clash or not all(name.isidentifier() for name in names):
        with pytest.raises(ValueError, match="kernel name"):
            _spec(space)
        return
    spec = _spec(space)  # accepted
    assert names == [leaf_name(leaf.path) for leaf in found] and all(name.startswith("obs_") for name in names)
    buffers = Buffers(spec, {"position": (), "energy": ()}, num_envs, 1, (), space, spaces.Discrete(3), True, "cpu")
    batched = batch_space(space, num_envs)
    host = build_tree(space, {name: to_numpy(array) for name, array in buffers.obs_leaves.items()})
    assert batched.contains(host)
    for name, array in leaf_arrays(space, host).items():
        leaf = {leaf.name: leaf for leaf in found}[name]
        assert array.shape == (num_envs, *leaf.shape) and array.dtype == leaf.dtype
    assert set(leaf_arrays(space, buffers.final_obs)) == set(names)


def test_a_key_path_name_clash_is_refused_naming_both_paths():
    space = spaces.Dict({"a_b": spaces.Discrete(2), "a": spaces.Dict({"b": spaces.Discrete(2)})})
    with pytest.raises(ValueError, match=r"\['a', 'b'\].*\['a_b'\].*'obs_a_b'|\['a_b'\].*\['a', 'b'\].*'obs_a_b'"):
        _spec(space)


def test_a_key_that_makes_no_identifier_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"observation_space\['x-y'\].*'obs_x-y'.*not a Python identifier"):
        _spec(spaces.Dict({"x-y": spaces.Discrete(2)}))


@pytest.mark.parametrize(
    "space, match",
    [
        (spaces.Dict({"t": spaces.Text(4)}), r"\['t'\]: expected a Box, Discrete, MultiBinary, Dict or Tuple"),
        (spaces.Dict({"m": spaces.MultiDiscrete([2, 3])}), r"\['m'\]: expected a Box, Discrete, MultiBinary"),
        (spaces.Dict({"e": spaces.Dict({})}), "at least one space"),
        (spaces.Discrete(3), "expected a Box, Dict or Tuple"),
    ],
)
def test_other_observation_spaces_are_refused_at_spec_validation(space, match):
    with pytest.raises((TypeError, ValueError), match=match):
        _spec(space)


def test_check_observation_space_keeps_a_box_as_the_one_leaf_obs():
    box = spaces.Box(-1.0, 1.0, (2,), np.float32)
    assert [leaf.name for leaf in check_observation_space("here", box)] == ["obs"]


def test_a_box_env_returns_one_array_and_a_dict_env_a_dict_of_batched_tensors():
    env = KernelVectorEnv(walk.SPEC, 2, backend="cpu", seed=0)
    obs, _ = env.reset()
    assert tuple(obs.shape) == (2, 2)
    env = KernelVectorEnv(dict_walk.SPEC, 3, backend="cpu", seed=0)
    obs, _ = env.reset()
    assert set(obs) == {"position", "flags", "nested"} and isinstance(obs["nested"]["pair"], tuple)
    assert env.observation_space.contains({key: value for key, value in env.numpy().obs.items()})
    assert (
        tuple(obs["nested"]["pair"][1].shape) == (3, 2, 2) and obs["nested"]["count"].dtype.is_floating_point is False
    )


def test_same_step_final_obs_is_the_observation_of_the_last_state():
    env = KernelVectorEnv(dict_walk.SPEC, 2, backend="cpu", seed=3, autoreset_mode="same_step")
    env.reset()
    right = np.array([[1, 0, 1], [1, 0, 0]], np.int8)
    for _ in range(12):
        before = env.get_state()
        info = env.step(right, numpy=True)[4]
        if info["_final_obs"].any():
            break
    index = int(np.flatnonzero(info["_final_obs"])[0])
    state = {name: value[index] for name, value in before.items()}
    last, _, _ = dict_walk._step(dict_walk.SPEC.params, state, right[index], None)
    expected = dict_walk._observe(dict_walk.SPEC.params, last)
    for name, value in leaf_arrays(dict_walk.OBSERVATION_SPACE, expected).items():
        np.testing.assert_array_equal(leaf_arrays(dict_walk.OBSERVATION_SPACE, info["final_obs"])[name][index], value)


def test_a_dict_env_kernel_naming_obs_is_told_the_leaf_names():
    @env_kernel
    def writes_obs(i, obs):
        obs[i, 0] = 0.0

    with pytest.raises(BindingError, match="obs_flags"):
        KernelVectorEnv(dataclasses.replace(dict_walk.SPEC, step_kernel=writes_obs), 2, backend="cpu")


def test_a_state_array_named_as_a_leaf_is_refused():
    state = (*dict_walk.STATE, kge.StateArray("obs_flags", np.int8))
    with pytest.raises(ValueError, match="obs_flags"):
        KernelVectorEnv(dataclasses.replace(dict_walk.SPEC, state=state), 2, backend="cpu")


@pytest.mark.parametrize("value", [2, -1, 256, 2**40])
def test_multibinary_actions_outside_zero_one_are_refused_with_their_index(value):
    env = KernelVectorEnv(dict_walk.SPEC, 2, backend="cpu", seed=0)
    env.reset()
    actions = np.zeros((2, 3), np.int64)
    actions[1, 2] = value
    before = env.get_state()
    with pytest.raises(ValueError, match=rf"expected values in MultiBinary\(3\), got {value} at index \(1, 2\)"):
        env.step(actions)
    # 256 would wrap to a valid 0 in the int8 buffer: refused before the copy, no env changed
    for name, array in env.get_state().items():
        np.testing.assert_array_equal(array, before[name])


def test_the_kit_passes_the_nested_dict_env_on_cpu():
    report = check_env(dict_walk.SPEC, backend="cpu", max_examples=3, seed=2)
    assert report.passed, format_report(report)


def test_the_kit_names_the_leaf_a_kernel_leaves_stale():
    report = check_env(dict_walk.STALE_PAIR, backend="cpu", max_examples=4, seed=1, checks=["parity"])
    assert not report.passed
    assert "leaves ['obs_nested_pair_1'] differ" in format_report(report)


@pytest.mark.sim
def test_the_kit_passes_the_nested_dict_env_on_sim():
    report = check_env(
        dict_walk.SPEC,
        backend="sim",
        max_examples=3,
        seed=2,
        checks=["parity", "autoreset", "observations", "invalid_actions", "out_of_bounds"],
    )
    assert report.passed, format_report(report)


def _walk_right(obs):
    """A policy on the Dict observation: step right, flag where the count is odd (torch ops only)."""
    count = obs["nested"]["count"]
    return torch.stack([torch.ones_like(count), torch.zeros_like(count), count % 2], dim=1).to(torch.int8)


def test_a_captured_step_of_a_dict_env_replays_as_direct_calls():
    """`capture_step` with the stand-in graph API (no GPU): the dict of leaf tensors is the buffer."""
    from test_cuda_graph import Recorder

    from kernelgym.envs.cuda_graph import capture_step

    direct = KernelVectorEnv(dict_walk.SPEC, 4, backend="cpu", seed=7, check_action_values="deferred")
    captured = KernelVectorEnv(dict_walk.SPEC, 4, backend="cpu", seed=7, check_action_values="deferred")
    obs, _ = captured.reset()
    recorder = Recorder()
    with pytest.raises(ValueError, match="obs: expected the env's observation buffer"):
        capture_step(captured, _walk_right, {**obs, "flags": obs["flags"].clone()}, api=recorder)
    assert recorder.events == []
    step = capture_step(captured, _walk_right, obs, warmup=2, api=recorder)
    expected, _ = direct.reset()
    for _ in range(2 + 1 + 5):  # warmup, capture, replays
        expected = direct.step(_walk_right(expected))[0]
    for _ in range(5):
        step.replay()
    for name, leaf in leaf_arrays(dict_walk.OBSERVATION_SPACE, step.obs).items():
        assert torch.equal(leaf, leaf_arrays(dict_walk.OBSERVATION_SPACE, expected)[name]), name


def test_the_kit_passes_a_multi_agent_env_with_dict_observations_on_cpu():
    from kit_fixtures import agent_dict_walk

    # gpu_compile is left out: agent_walk's spec holds a lambda, which the compile child cannot unpickle
    checks = [name for name in check_names() if name != "gpu_compile"]
    report = check_env(agent_dict_walk.SPEC, backend="cpu", max_examples=3, seed=5, checks=checks)
    assert report.passed, format_report(report)


def test_pettingzoo_gives_each_agent_its_dict_and_passes_the_api_test():
    from pettingzoo.test import parallel_api_test

    from kernelgym.envs.pettingzoo_adapter import KernelParallelEnv
    from kit_fixtures import agent_dict_walk

    if agent_dict_walk.SPEC.id not in kge.list_envs():
        kge.register_plugin(agent_dict_walk, name="agent_dict_walk")
    env = KernelParallelEnv(agent_dict_walk.SPEC.id, seed=0)
    observations, _ = env.reset(seed=3)
    state = env.env.get_state(0)
    for index, agent in enumerate(env.possible_agents):
        assert env.observation_space(agent).contains(observations[agent])
        assert observations[agent]["position"][0] == np.float32(state["position"][index] / 3)
    parallel_api_test(env, num_cycles=50)


@functools.lru_cache(maxsize=1)
def _dict_walk_env():
    return KernelVectorEnv(dict_walk.SPEC, 4, backend="cpu", seed=0)


@settings(max_examples=30, deadline=None)
@given(
    positions=st.lists(st.integers(-3, 3), min_size=4, max_size=4),
    counts=st.lists(st.integers(0, 99), min_size=4, max_size=4),
    actions=st.lists(st.lists(st.integers(0, 1), min_size=3, max_size=3), min_size=4, max_size=4),
)
def test_kernel_observations_equal_the_references_leaf_by_leaf(positions, counts, actions):
    env = _dict_walk_env()
    state = {
        "position": np.array(positions, np.int32),
        "count": np.array(counts, np.int32),
        "flags": np.zeros((4, 3), np.int8),
    }
    env.set_state(state)
    actions = np.array(actions, np.int8)
    obs = env.step(actions, numpy=True)[0]
    params = dict_walk.SPEC.params
    for index in range(4):
        one = {name: value[index] for name, value in state.items()}
        expected = dict_walk._observe(params, dict_walk._step(params, one, actions[index], None)[0])
        for name, value in leaf_arrays(dict_walk.OBSERVATION_SPACE, expected).items():
            got = leaf_arrays(dict_walk.OBSERVATION_SPACE, obs)[name][index]
            assert got.dtype == np.asarray(value).dtype and np.array_equal(got, value), (name, got, value)


def test_a_nan_in_a_leaf_is_found_and_located_in_the_kernel():
    report = check_env(dict_walk.NAN_POSITION, backend="cpu", max_examples=10, seed=3, checks=["observations"])
    observations = report["observations"]
    assert observations.status == "failed", observations.message
    assert "has NaN or inf" in observations.message, observations.message
    assert "NaN/inf arises in step_nan_position at" in observations.message, observations.message
    assert dict_walk.NAN_LINE in observations.message, observations.message


# A Tuple observation at the top: its items are the leaves obs_0 and obs_1.
TUPLE_SPACE = spaces.Tuple((spaces.Box(-10.0, 10.0, (1,), np.float32), spaces.Discrete(2)))


@env_kernel
def tuple_step(i, actions, obs_0, obs_1, rewards, terminated, position):
    position[i] += actions[i] - 1
    obs_0[i, 0] = position[i]
    obs_1[i] = position[i] > 0
    rewards[i] = 0.5
    terminated[i] = abs(position[i]) >= 3


@env_kernel
def tuple_reset(i, rng_states, obs_0, obs_1, position):
    position[i] = rng.randint(rng_states, i, 3) - 1
    obs_0[i, 0] = position[i]
    obs_1[i] = position[i] > 0


def _tuple_reference():
    def reset(params, rng_states):
        return {"position": np.int32(rng.randint(rng_states, 0, 3) - 1).reshape(())}

    def step(params, state, action, rng_states):
        position = int(state["position"]) + int(action) - 1
        return {"position": np.int32(position).reshape(())}, 0.5, abs(position) >= 3

    def observe(params, state):
        return np.array([state["position"]], np.float32), np.int64(state["position"] > 0)

    return kge.CPUReference(reset, step, observe)


TUPLE_SPEC = kge.EnvSpec(
    id="TupleWalk-v0",
    observation_space=TUPLE_SPACE,
    action_space=spaces.Discrete(3),
    state=(kge.StateArray("position", np.int32),),
    step_kernel=tuple_step,
    reset_kernel=tuple_reset,
    reference=_tuple_reference(),
    max_episode_steps=8,
)


def test_a_tuple_observation_binds_its_items_by_index_and_passes_the_kit():
    env = KernelVectorEnv(TUPLE_SPEC, 3, backend="cpu", seed=0)
    obs, _ = env.reset()
    assert isinstance(obs, tuple) and tuple(obs[0].shape) == (3, 1) and tuple(obs[1].shape) == (3,)
    assert env.observation_space.contains(env.numpy().obs)
    report = check_env(
        TUPLE_SPEC, backend="cpu", max_examples=3, seed=1, checks=["parity", "autoreset", "observations"]
    )
    assert report.passed, format_report(report)
