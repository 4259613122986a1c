"""Per-env params (`EnvSpec.per_env_params`): arrays at make(), set_params, randomize=, set_randomize.

The property tests hold CartPole to the dynamics of its reference built with each env's
own params, bit for bit, and to gymnasium's CartPoleEnv built with that env's pole
length, within the tolerance of test_cartpole.py (state is stored as float32).
"""

import dataclasses
import time

import gymnasium
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kernelgym.envs as kge
from kernelgym.envs.classic import cartpole
from kernelgym.envs.runtime.params import reference_draw
from kernelgym.envs.runtime.streams import seed_env_streams
from kernelgym.envs.runtime.vector_env import KernelVectorEnv

N = 16
LENGTHS = st.lists(st.floats(0.05, 2.0), min_size=N, max_size=N).map(np.array)
NAMES = cartpole._STATE_NAMES


@pytest.fixture(scope="module")
def env():
    return kge.make("CartPole-v1", N, backend="cpu", seed=0)


@pytest.fixture(scope="module")
def randomized():
    return kge.make("CartPole-v1", N, backend="cpu", seed=0, randomize={"length": (0.4, 0.6)})


@pytest.fixture(scope="module")
def gym_env():
    environment = gymnasium.make("CartPole-v1").unwrapped
    environment.reset(seed=0)
    return environment


def _gymnasium_step(gym_env, state, action, length):
    gym_env.length = float(length)
    gym_env.polemass_length = gym_env.masspole * gym_env.length
    gym_env.state = np.array([float(state[name]) for name in NAMES], dtype=np.float64)
    gym_env.steps_beyond_terminated = None
    obs, *_ = gym_env.step(int(action))
    return obs


def _slice(state, index):
    return {name: value[index] for name, value in state.items()}


def _check_step(env, gym_env, actions, lengths):
    """One step of every env against its own reference (bitwise) and its own gymnasium CartPoleEnv."""
    before = env.get_state()
    obs, rewards, terminated, _, _ = env.step(actions, numpy=True)
    after = env.get_state()
    for index in range(env.num_envs):
        params = env.env_params(index)
        assert params.length == lengths[index]
        state, reward, done = cartpole.reference.step(params, _slice(before, index), actions[index])
        for name in NAMES:
            assert state[name].tobytes() == after[name][index].tobytes(), (index, name)
        assert (reward, done) == (rewards[index], terminated[index])
        np.testing.assert_allclose(
            obs[index],
            _gymnasium_step(gym_env, _slice(before, index), actions[index], lengths[index]),
            rtol=1e-5,
            atol=1e-6,
        )


@settings(max_examples=20, deadline=None)
@given(
    lengths=LENGTHS,
    actions=st.lists(st.integers(0, 1), min_size=N, max_size=N).map(np.array),
    steps=st.integers(1, 5),
    seed=st.integers(0, 2**16),
)
def test_set_params_gives_each_env_the_dynamics_of_its_own_length(env, gym_env, lengths, actions, steps, seed):
    env.reset(seed=seed)
    env.set_params(length=lengths)
    np.testing.assert_array_equal(env.get_params()["length"], lengths)
    for _ in range(steps):
        if np.any(env.numpy().terminated):  # the next step would reset it: start all anew
            env.reset()
        _check_step(env, gym_env, actions, lengths)


@settings(max_examples=15, deadline=None)
@given(
    low=st.floats(0.1, 1.0),
    width=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**16),
    actions=st.lists(st.integers(0, 1), min_size=N, max_size=N).map(np.array),
)
def test_randomize_draws_each_envs_length_from_its_own_stream_at_reset(randomized, gym_env, low, width, seed, actions):
    ranges = {"length": (low, low + width)}
    randomized.set_randomize(ranges)
    randomized.reset(seed=seed)
    lengths = randomized.get_params()["length"]
    start = randomized.get_state()
    for index, row in enumerate(seed_env_streams(randomized.spec, seed, N, 1)):
        stream = row.reshape(1, 2).copy()
        params = reference_draw(randomized.spec, randomized.params, ranges, stream)
        assert params.length == lengths[index] and low <= lengths[index] <= low + width
        reset = cartpole.reference.reset(params, stream)
        assert all(reset[name].tobytes() == start[name][index].tobytes() for name in NAMES)
        assert stream.tobytes() == randomized.get_rng_states(index).tobytes()  # the same draws, no more
    _check_step(randomized, gym_env, actions, lengths)


def test_an_autoreset_draws_anew_only_for_the_env_that_resets():
    env = kge.make("CartPole-v1", 4, backend="cpu", seed=5, randomize={"length": (0.4, 0.6)}, max_episode_steps=1)
    env.reset(seed=5)
    first = env.get_params()["length"]
    state = env.get_state()
    env.step(np.zeros(4, np.int64))  # time limit: every env is truncated, no draw
    np.testing.assert_array_equal(env.get_params()["length"], first)
    env.set_state(_slice(state, 1), index=1)  # env 1 no longer pending a reset
    rows = env.get_rng_states()
    env.step(np.zeros(4, np.int64))  # the reset step draws anew, from each resetting env's own stream
    lengths = env.get_params()["length"]
    assert lengths[1] == first[1]
    for index in (0, 2, 3):
        stream = rows[index].reshape(1, 2).copy()
        assert reference_draw(env.spec, env.params, env.randomize, stream).length == lengths[index] != first[index]


def test_set_randomize_changes_the_ranges_with_no_recompilation():
    env = kge.make("CartPole-v1", 64, backend="cpu", seed=1, randomize={})
    launch = env._launch_reset
    env.reset(seed=1)
    np.testing.assert_array_equal(env.get_params()["length"], 0.5)  # nothing active: no draw
    env.set_randomize({"length": (1.0, 1.5), "masspole": (0.2, 0.3)})
    env.reset()
    params = env.get_params()
    assert np.all((params["length"] >= 1.0) & (params["length"] < 1.5)) and np.unique(params["length"]).size > 1
    assert np.all((params["masspole"] >= 0.2) & (params["masspole"] < 0.3))
    assert env._launch_reset is launch and env.randomize == {"length": (1.0, 1.5), "masspole": (0.2, 0.3)}


def test_make_takes_arrays_for_per_env_fields_and_scalars_for_every_env():
    lengths = np.linspace(0.3, 0.9, 6)
    env = kge.make("CartPole-v1", 6, backend="cpu", seed=0, length=lengths, gravity=9.0)
    params = env.get_params()
    np.testing.assert_array_equal(params["length"], lengths)
    np.testing.assert_array_equal(params["gravity"], 9.0)
    assert env.env_params(2) == dataclasses.replace(cartpole.CartPoleParams(), length=lengths[2], gravity=9.0)
    env.set_params(gravity=np.arange(1.0, 7.0))
    assert env.env_params(5).gravity == 6.0 and env.env_params(5).length == lengths[5]


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"x_threshold": np.ones(4)}, TypeError, "'x_threshold' is a compile-time constant"),
        ({"length": np.ones(3)}, ValueError, r"param 'length': expected a scalar or shape \(4,\), got shape \(3,\)"),
        ({"length": np.array([0.5, np.nan, 0.5, 0.5])}, ValueError, "param 'length': expected finite values"),
        ({"length": np.array([0.5, -0.1, 0.5, 0.5])}, ValueError, "CartPoleParams length: expected > 0"),
        ({"length": np.array(["a"] * 4)}, TypeError, "expected float values"),
        ({"randomize": {"x_threshold": (1.0, 2.0)}}, ValueError, "randomize: param 'x_threshold' cannot be drawn"),
        ({"randomize": {"length": (0.6, 0.4)}}, ValueError, r"randomize\['length'\]: expected finite low <= high"),
        ({"randomize": {"length": (-1.0, 0.4)}}, ValueError, "CartPoleParams length: expected > 0"),
        ({"randomize": {"length": 0.5}}, TypeError, r"randomize\['length'\]: expected a \(low, high\) pair"),
    ],
)
def test_bad_per_env_values_are_refused_at_make_naming_the_param(kwargs, error, message):
    with pytest.raises(error, match=message):
        kge.make("CartPole-v1", 4, backend="cpu", **kwargs)


def test_set_params_checks_everything_before_writing_anything(env):
    env.set_params(length=0.5, gravity=9.8)
    with pytest.raises(ValueError, match="expected > 0"):
        env.set_params(gravity=np.full(N, 3.0), length=np.r_[np.full(N - 1, 0.7), -1.0])
    with pytest.raises(TypeError, match="'x_threshold' cannot change per env or at run time"):
        env.set_params(x_threshold=1.0)
    params = env.get_params()
    assert np.all(params["length"] == 0.5) and np.all(params["gravity"] == 9.8)


def test_envs_without_per_env_params_refuse_set_params_and_randomize():
    with pytest.raises(ValueError, match="declares no per-env params"):
        kge.make("GoRight-v0", 2, backend="cpu", randomize={"slip": (0.0, 0.1)})
    env = kge.make("GoRight-v0", 2, backend="cpu")
    with pytest.raises(TypeError, match="declares no per-env params"):
        env.set_params(slip=0.2)
    with pytest.raises(TypeError, match="'slip' is a compile-time constant"):
        kge.make("GoRight-v0", 2, backend="cpu", slip=np.array([0.1, 0.2]))
    fixed = kge.make("CartPole-v1", 2, backend="cpu")
    with pytest.raises(RuntimeError, match="made without randomize="):
        fixed.set_randomize({"length": (0.4, 0.6)})


def test_spec_per_env_params_must_name_float_fields():
    spec = kge.get_spec("CartPole-v1")
    with pytest.raises(ValueError, match="per_env_params: expected distinct names of float params fields"):
        dataclasses.replace(spec, per_env_params=("semi_implicit_euler",))
    with pytest.raises(TypeError, match="got the string"):
        dataclasses.replace(spec, per_env_params="length")
    assert dataclasses.replace(spec, per_env_params=("tau", "gravity")).per_env_params == ("gravity", "tau")


def test_set_params_host_time_is_well_under_a_millisecond_at_4096_envs():
    env = kge.make("CartPole-v1", 4096, backend="cpu", seed=0)
    lengths = np.linspace(0.4, 0.6, 4096)
    env.set_params(length=lengths)
    best = min(_timed(env.set_params, length=lengths) for _ in range(50))
    assert best < 0.5e-3, best


def _timed(call, **kwargs):
    start = time.perf_counter()
    call(**kwargs)
    return time.perf_counter() - start


@pytest.mark.sim
@settings(max_examples=4, deadline=None)
@given(lengths=LENGTHS, seed=st.integers(0, 2**16))
def test_sim_per_env_params_and_randomize_equal_cpu(lengths, seed):
    results = []
    for backend in ("cpu", "sim"):
        env = kge.make(
            "CartPole-v1",
            N,
            backend=backend,
            seed=seed,
            length=lengths,
            randomize={"masspole": (0.05, 0.2)},
            max_episode_steps=3,
        )
        env.reset(seed=seed)
        for _ in range(4):
            env.step(np.ones(N, np.int64))
        results.append((env.get_state(), env.get_params()))
    for name in NAMES:
        assert results[0][0][name].tobytes() == results[1][0][name].tobytes()
    for name in results[0][1]:
        assert results[0][1][name].tobytes() == results[1][1][name].tobytes()


def test_the_gymnasium_adapters_pass_randomize_and_per_env_arrays_through():
    # SB3's adapter: tests/clients/test_training.py trains on a randomized CartPole
    single = gymnasium.make("kernelgym/CartPole-v1", randomize={"length": (0.4, 0.6)}, masspole=0.2)
    single.reset(seed=0)
    assert single.unwrapped.env.randomize == {"length": (0.4, 0.6)}
    assert 0.4 <= single.unwrapped.env.get_params()["length"][0] < 0.6
    vector = gymnasium.make_vec(
        "kernelgym/CartPole-v1", num_envs=3, vectorization_mode="vector_entry_point", length=np.array([0.3, 0.5, 0.7])
    )
    np.testing.assert_array_equal(vector.unwrapped.env.get_params()["length"], [0.3, 0.5, 0.7])
    with pytest.raises(TypeError, match="'x_threshold' is a compile-time constant"):
        gymnasium.make_vec(
            "kernelgym/CartPole-v1", num_envs=2, vectorization_mode="vector_entry_point", x_threshold=np.ones(2)
        )


def test_a_row_whose_envs_agree_is_read_once_and_per_env_once_they_differ():
    env = kge.make("CartPole-v1", 4, backend="cpu", seed=0, randomize={})
    table = env._params_table
    row = table.fields.index("length")
    assert table.strides[row] == 0  # every env reads entry 0
    env.set_params(length=np.array([0.4, 0.5, 0.6, 0.7]))
    assert table.strides[row] == 1
    env.set_params(length=0.5)
    assert table.strides[row] == 0
    env.set_randomize({"length": (0.4, 0.6)})
    assert table.strides[row] == 1
    env.set_randomize({})  # the drawn values stay: still read per env
    env.reset()
    assert table.strides[row] == 1


def test_agent_layout_envs_take_per_env_values_and_refuse_randomize():
    from kit_fixtures import agent_walk

    spec = dataclasses.replace(agent_walk.SPEC, per_env_params=("home_reward",))
    with pytest.raises(ValueError, match="randomize: env .* kernel_layout='agent'; randomize= draws from one stream"):
        KernelVectorEnv(spec, 2, backend="cpu", seed=0, randomize={"home_reward": (1.0, 2.0)})
    env = KernelVectorEnv(spec, 3, backend="cpu", seed=0, home_reward=np.array([1.0, 2.0, 3.0]))
    env.reset(seed=0)
    np.testing.assert_array_equal(env.get_params()["home_reward"], [1.0, 2.0, 3.0])
    assert env.env_params(2).home_reward == 3.0
    arrivals = 0
    for _ in range(30):  # every agent walks right, to the goal
        rewards = env.step(np.full((3, spec.resolve().num_agents), 2, np.int64), numpy=True)[1]
        # a reward of home_reward only ever comes from that env's own value
        for index, reward in enumerate(rewards):
            assert set(reward[reward > 0].tolist()) <= {float(index + 1)}
            arrivals += int(np.sum(reward > 0))
    assert arrivals > 0
