"""Issue 25 fuzz: the env runtime and its adapters under hostile input.

A hypothesis state machine drives a small CartPole `KernelVectorEnv` (cpu, the default
build other tests compile) with valid and hostile actions, hostile ``set_state``
values, attribute settings, seeded resets and state reads, next to a reference model:
CartPole's exact CPU reference (`cartpole.reference`, the kernel's own physics, stepped
per env on the env's own RNG stream) plus the runtime's bookkeeping written out in
Python (autoreset in NEXT_STEP mode, time limit, episode statistics). After each rule,
either a clear error was raised (a TypeError, ValueError, IndexError, KeyError or
AttributeError whose message names the argument) and nothing changed, or the env's
outputs, state, actions buffer and statistics equal the reference's, bit for bit.

The single-env adapters (gymnasium, PettingZoo) are checked against gymnasium's own
CartPole: they refuse exactly the actions its ``action_space.contains`` refuses.
"""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import kernelgym.envs as kge
from kernelgym.envs.classic import cartpole
from kernelgym.envs.gymnasium_env import KernelGymnasiumEnv
from kernelgym.envs.runtime.streams import seed_env_streams

SPEC = cartpole.SPEC
PARAMS = cartpole.CartPoleParams()
NAMES = ("x", "x_dot", "theta", "theta_dot")
NUM_ENVS = 3
ERRORS = (TypeError, ValueError, IndexError, KeyError, AttributeError)


def _refused(call, argument: str) -> bool:
    """Run ``call``; True when it raised a clear error naming ``argument`` (anything else fails)."""
    try:
        call()
    except ERRORS as error:
        assert argument in str(error), f"{type(error).__name__} does not name {argument!r}: {error}"
        return True
    return False


valid_actions = st.lists(st.integers(0, 1), min_size=NUM_ENVS, max_size=NUM_ENVS).map(
    lambda values: np.array(values, np.int64)
)
hostile_actions = st.one_of(
    st.lists(st.floats(0, 1.9), min_size=NUM_ENVS, max_size=NUM_ENVS).map(np.array),  # 0.7 is no action
    st.lists(st.integers(-3, 5), min_size=NUM_ENVS, max_size=NUM_ENVS)
    .map(np.array)
    .filter(lambda a: np.any((a < 0) | (a > 1))),
    st.lists(st.integers(2**31, 2**40), min_size=NUM_ENVS, max_size=NUM_ENVS).map(np.array),
    st.integers(0, 1).map(lambda v: np.full(NUM_ENVS + 1, v)),  # wrong shape
    st.integers(0, 1).map(lambda v: np.full((NUM_ENVS, 2), v)),
    st.just(np.ones(NUM_ENVS, np.bool_)),
    st.just(torch.full((NUM_ENVS,), 0.7)),
    st.lists(st.integers(0, 1), min_size=NUM_ENVS, max_size=NUM_ENVS),  # a list: not an array
    st.just(None),
)
# values a float32 state cannot take as given, or cannot take at all
hostile_state_values = st.one_of(
    st.sampled_from([1e39, -1e300, 2.0**200]).map(lambda v: np.full(NUM_ENVS, v)),
    st.just(np.full(NUM_ENVS, 1 + 2j)),
    st.just(np.array(["a"] * NUM_ENVS)),
    st.integers(1, 4).map(lambda k: np.zeros(NUM_ENVS + k, np.float32)),
    st.just(np.zeros((NUM_ENVS, 1), np.float32)),
)
state_values = st.floats(-0.5, 0.5, width=32)  # past the thresholds too: episodes end


class RuntimeMachine(RuleBasedStateMachine):
    """A CartPole vector env and its reference, in lockstep."""

    @initialize(seed=st.integers(0, 2**32))
    def make(self, seed):
        self.env = kge.make("CartPole-v1", NUM_ENVS, backend="cpu", seed=seed)
        self.rng = seed_env_streams(SPEC, seed, NUM_ENVS, 1)
        self.limit = SPEC.max_episode_steps
        self._reference_reset_all()
        self.env.reset()

    def teardown(self):
        if hasattr(self, "env"):
            self.env.close()

    # ------------------------------------------------------------ reference
    def _reference_reset(self, index: int) -> None:
        row = self.rng[index : index + 1]  # the env's own stream, advanced in place
        self.states[index] = cartpole.reference.reset(PARAMS, row)
        self.steps[index], self.returns[index], self.pending[index] = 0, np.float32(0), False

    def _reference_reset_all(self) -> None:
        self.states = [None] * NUM_ENVS
        self.steps, self.returns, self.pending = [0] * NUM_ENVS, [np.float32(0)] * NUM_ENVS, [False] * NUM_ENVS
        for index in range(NUM_ENVS):
            self._reference_reset(index)

    def _reference_step(self, actions) -> tuple:
        rewards = np.zeros(NUM_ENVS, np.float32)
        terminated, truncated = np.zeros(NUM_ENVS, bool), np.zeros(NUM_ENVS, bool)
        lengths, episode_returns = np.zeros(NUM_ENVS, np.int64), np.zeros(NUM_ENVS, np.float32)
        for index in range(NUM_ENVS):
            if self.pending[index]:  # NEXT_STEP: this step resets the env, and belongs to no episode
                self._reference_reset(index)
                continue
            state, reward, ended = cartpole.reference.step(PARAMS, self.states[index], actions[index])
            self.states[index] = state
            self.steps[index] += 1
            rewards[index], terminated[index] = reward, ended
            truncated[index] = self.limit is not None and self.steps[index] >= self.limit
            total = np.float32(self.returns[index] + np.float32(reward))
            if ended or truncated[index]:
                episode_returns[index], lengths[index] = total, self.steps[index]
                self.returns[index], self.pending[index] = np.float32(0), True
            else:
                self.returns[index] = total
        return rewards, terminated, truncated, episode_returns, lengths

    def _expected_state(self) -> dict:
        return {name: np.array([self.states[k][name] for k in range(NUM_ENVS)], np.float32) for name in NAMES}

    # ---------------------------------------------------------------- rules
    @rule(actions=valid_actions, as_tensor=st.booleans())
    def step(self, actions, as_tensor):
        obs, rewards, terminated, truncated, info = self.env.step(torch.from_numpy(actions) if as_tensor else actions)
        expected = self._reference_step(actions)
        names = ("rewards", "terminated", "truncated", "episode r", "episode l")
        for name, got, want in zip(
            names, (rewards, terminated, truncated, info["episode"]["r"], info["episode"]["l"]), expected
        ):
            np.testing.assert_array_equal(got.numpy(), want, err_msg=name)
        np.testing.assert_array_equal(info["_episode"].numpy(), expected[4] > 0)
        state = self._expected_state()
        np.testing.assert_array_equal(obs.numpy(), np.stack([state[name] for name in NAMES], axis=1))
        # the data manager's actions buffer holds what was just stepped (also on the fast path)
        np.testing.assert_array_equal(self.env.data_manager.pull_data_from_device("actions"), actions)

    @rule(actions=hostile_actions)
    def step_hostile(self, actions):
        assert _refused(lambda: self.env.step(actions), "actions")  # and nothing stepped (checked below)

    @rule(index=st.integers(0, NUM_ENVS - 1), values=st.lists(state_values, min_size=4, max_size=4), keep=st.booleans())
    def set_state_one(self, index, values, keep):
        self.env.set_state({name: np.float32(v) for name, v in zip(NAMES, values)}, index=index, keep_episode_step=keep)
        self.states[index] = {name: np.float32(v).reshape(()) for name, v in zip(NAMES, values)}
        if not keep:  # a new episode: its counter and its return start here
            self.steps[index], self.returns[index], self.pending[index] = 0, np.float32(0), False

    @rule(
        name=st.sampled_from(NAMES),
        values=st.lists(state_values, min_size=NUM_ENVS, max_size=NUM_ENVS),
        as_list=st.booleans(),
    )
    def set_state_all(self, name, values, as_list):
        array = np.array(values, np.float64)  # float64 values a float32 state holds: accepted
        self.env.set_state({name: list(values) if as_list else array})
        for index in range(NUM_ENVS):
            self.states[index] = {**self.states[index], name: np.float32(array[index]).reshape(())}
            self.steps[index], self.returns[index], self.pending[index] = 0, np.float32(0), False

    @rule(name=st.sampled_from(NAMES), value=hostile_state_values)
    def set_state_hostile(self, name, value):
        assert _refused(lambda: self.env.set_state({name: value}), f"state[{name!r}]")

    @rule(call=st.sampled_from(["unknown key", "index", "index type", "keep type", "not a dict"]))
    def set_state_hostile_arguments(self, call):
        zero = {name: np.float32(0) for name in NAMES}
        calls = {
            "unknown key": (lambda: self.env.set_state({"y": np.zeros(NUM_ENVS)}), "state"),
            "index": (lambda: self.env.set_state(zero, index=NUM_ENVS), "index"),
            "index type": (lambda: self.env.set_state(zero, index=1.0), "index"),
            "keep type": (lambda: self.env.set_state(zero, index=0, keep_episode_step="no"), "keep_episode_step"),
            "not a dict": (lambda: self.env.set_state([np.zeros(NUM_ENVS)]), "state"),
        }
        assert _refused(*calls[call])

    @rule(limit=st.one_of(st.none(), st.integers(1, 6)))
    def set_time_limit(self, limit):
        self.env.max_episode_steps = limit
        assert self.env.max_episode_steps == limit
        self.limit = limit

    @rule(value=st.sampled_from([0, -1, 2.5, True, 2**40, "3"]))
    def set_time_limit_hostile(self, value):
        assert _refused(lambda: setattr(self.env, "max_episode_steps", value), "max_episode_steps")

    @rule(name=st.sampled_from(["params", "num_envs", "state", "autoreset_mode", "spec", "backend", "whatever"]))
    def set_fixed_attribute(self, name):
        assert _refused(lambda: setattr(self.env, name, None), name)

    @rule(name=st.sampled_from(NAMES))
    def rebind_state_entry(self, name):
        assert _refused(lambda: self.env.state.__setitem__(name, np.zeros(NUM_ENVS, np.float32)), f"state[{name!r}]")

    @rule(seed=st.one_of(st.none(), st.integers(0, 2**32)))
    def reset(self, seed):
        if seed is not None:
            self.rng = seed_env_streams(SPEC, seed, NUM_ENVS, 1)
        obs, _ = self.env.reset(seed=seed)
        self._reference_reset_all()
        state = self._expected_state()
        np.testing.assert_array_equal(obs.numpy(), np.stack([state[name] for name in NAMES], axis=1))

    @rule(seed=st.sampled_from([-1, 1.5, "0", True]))
    def reset_hostile(self, seed):
        assert _refused(lambda: self.env.reset(seed=seed), "seed")

    @rule(index=st.one_of(st.integers(-3, NUM_ENVS + 2), st.just(1.0), st.just(True)))
    def get_state_index(self, index):
        if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < NUM_ENVS:
            got = self.env.get_state(index)
            for name in NAMES:
                assert got[name] == self.states[index][name]
        else:
            assert _refused(lambda: self.env.get_state(index), "index")

    # ------------------------------------------------------------ invariant
    @invariant()
    def state_equals_the_reference(self):
        if not hasattr(self, "env"):
            return
        got = self.env.get_state()
        for name, want in self._expected_state().items():
            np.testing.assert_array_equal(got[name], want, err_msg=name)
        np.testing.assert_array_equal(self.env.get_rng_states(), self.rng)


RuntimeMachine.TestCase.settings = settings(
    max_examples=30, stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestRuntimeFuzz = RuntimeMachine.TestCase


# ---------------------------------------------------------------- adapters
single_actions = st.one_of(
    st.integers(-2, 3),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.integers(-2, 3).map(np.int64),
    st.integers(-2, 3).map(np.int8),
    st.integers(0, 1).map(np.float32),
    st.integers(-1, 2).map(np.array),
    st.integers(0, 1).map(lambda v: np.array([v])),
    st.integers(0, 1).map(lambda v: np.array(v, np.float64)),
    st.just(np.array(True)),
    st.just(None),
    st.just("1"),
    st.just([1]),
)


@pytest.fixture(scope="module")
def single_envs():
    ours = KernelGymnasiumEnv("CartPole-v1", seed=0)
    theirs = gymnasium.make("CartPole-v1").unwrapped
    yield ours, theirs
    ours.close()


@settings(max_examples=60, deadline=None)
@given(action=single_actions)
def test_the_gymnasium_env_refuses_what_gymnasiums_cartpole_refuses(single_envs, action):
    ours, theirs = single_envs
    ours.reset(seed=0)
    before = ours.env.get_state()
    if theirs.action_space.contains(action):
        ours.step(action)
        after = ours.env.get_state()
        assert not all(np.array_equal(after[name], before[name]) for name in NAMES)
    else:
        assert _refused(lambda: ours.step(action), "action")
        after = ours.env.get_state()
        assert all(np.array_equal(after[name], before[name]) for name in NAMES)


@pytest.mark.filterwarnings("ignore:.*Raising the last exception:UserWarning")  # async's report of the error
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_make_vec_refuses_a_float_action(mode):
    envs = gymnasium.make_vec("kernelgym/CartPole-v1", num_envs=2, vectorization_mode=mode)
    try:
        envs.reset(seed=0)
        with pytest.raises(TypeError, match="action: expected an int in Discrete"):
            envs.step(np.array([0.7, 0.7]))
    finally:
        envs.close()


def test_the_pettingzoo_adapter_refuses_what_gymnasiums_spaces_refuse():
    pytest.importorskip("pettingzoo")
    from kernelgym.envs.pettingzoo_adapter import KernelParallelEnv

    env = KernelParallelEnv("CartPole-v1", seed=0)
    try:
        env.reset(seed=0)
        for action, error in ((0.7, TypeError), (np.array([1]), TypeError), (2, ValueError)):
            with pytest.raises(error, match=r"actions\['agent_0'\]"):
                env.step({"agent_0": action})
        env.step({"agent_0": np.int64(1)})
    finally:
        env.close()


@pytest.mark.parametrize(
    "value, message",
    [
        (np.array([1e39]), r"actions: got 1e\+39 at index \(0, 0\), which overflows float32"),
        (np.array([np.nan]), r"actions: expected finite values, got nan at index \(0, 0\)"),
    ],
)
def test_a_finite_action_that_overflows_float32_is_named_as_an_overflow(value, message):
    env = kge.make("Pendulum-v1", 1, backend="cpu", seed=0)
    try:
        env.reset()
        with pytest.raises(ValueError, match=message):
            env.step(value.reshape(1, 1))
    finally:
        env.close()


def test_set_state_refuses_an_integer_its_dtype_would_wrap():
    env = kge.make("TagGridWorld-v0", 2, backend="cpu", seed=0)
    try:
        env.reset()
        before = env.get_state()
        array = before["loc_x"]
        assert array.dtype == np.int32
        with pytest.raises(ValueError, match=r"state\['loc_x'\].*4294967299.*int32 cannot hold"):
            env.set_state({"loc_x": np.full(array.shape, 2**32 + 3, np.int64)})
        after = env.get_state()
        assert all(np.array_equal(after[key], value) for key, value in before.items())
        env.set_state({"loc_x": np.ones(array.shape, np.int64)})  # int64 values int32 holds: accepted
        assert np.array_equal(env.get_state()["loc_x"], np.ones(array.shape, np.int32))
    finally:
        env.close()


# ------------------------------------------------- the defects, one test each
def test_the_actions_buffer_holds_the_actions_just_stepped_on_the_fast_path():
    env = kge.make("CartPole-v1", NUM_ENVS, backend="cpu", seed=0)
    try:
        env.reset()
        for actions in (np.array([1, 0, 1]), torch.tensor([0, 1, 1])):  # both reach the kernel uncast
            env.step(actions)
            np.testing.assert_array_equal(env.data_manager.pull_data_from_device("actions"), np.asarray(actions))
    finally:
        env.close()


def test_set_state_mid_episode_restarts_the_return_with_the_length():
    env = kge.make("CartPole-v1", 1, backend="cpu", seed=0, max_episode_steps=4)
    try:
        env.reset()
        for _ in range(2):
            env.step(np.array([0]))
        env.set_state({name: np.zeros(1, np.float32) for name in NAMES})  # a new episode starts here
        for _ in range(4):
            _, _, _, truncated, info = env.step(np.array([1]))
        assert bool(truncated[0])
        assert int(info["episode"]["l"][0]) == 4 and float(info["episode"]["r"][0]) == 4.0
        env.reset()
        env.step(np.array([0]))
        env.set_state({"x": np.zeros(1, np.float32)}, keep_episode_step=True)  # the episode goes on, for both
        for _ in range(3):
            _, _, _, truncated, info = env.step(np.array([1]))
        assert bool(truncated[0])
        assert int(info["episode"]["l"][0]) == 4 and float(info["episode"]["r"][0]) == 4.0
    finally:
        env.close()


def test_set_state_refuses_a_finite_float_that_overflows_float32():
    env = kge.make("CartPole-v1", 2, backend="cpu", seed=0)
    try:
        env.reset()
        before = env.get_state()
        with pytest.raises(ValueError, match=r"state\['x'\]: got 1e\+39, which overflows float32"):
            env.set_state({"x": np.array([0.0, 1e39])})
        np.testing.assert_array_equal(env.get_state()["x"], before["x"])
        env.set_state({"x": np.array([np.inf, 2.0**64])})  # infinity as given, a big int: stored as given
        np.testing.assert_array_equal(env.get_state()["x"], np.array([np.inf, 2.0**64], np.float32))
    finally:
        env.close()


def test_set_params_names_a_finite_value_that_overflows_the_float32_table():
    env = kge.make("CartPole-v1", 3, backend="cpu", seed=0, precision="float32")  # test_precision's build
    try:
        with pytest.raises(ValueError, match=r"set_params param 'length': got 1e\+39, which overflows float32"):
            env.set_params(length=np.array([0.5, 1e39, 0.5]))
        np.testing.assert_array_equal(env.get_params()["length"], np.full(3, 0.5, np.float32))
    finally:
        env.close()


def test_the_gymnasium_vector_env_refuses_settings_that_would_change_nothing():
    from kernelgym.envs.gymnasium_adapter import KernelGymnasiumVectorEnv

    envs = KernelGymnasiumVectorEnv("CartPole-v1", 2, backend="cpu", seed=0)
    try:
        for name, value in (("num_envs", 4), ("autoreset_mode", gymnasium.vector.AutoresetMode.NEXT_STEP)):
            with pytest.raises(AttributeError, match=name):
                setattr(envs, name, value)
        with pytest.raises(ValueError, match="render_mode"):
            envs.render_mode = "human"
        envs.render_mode = "rgb_array"  # a mode the env has: applied
        assert envs.render()[0].ndim == 3
        assert envs.num_envs == 2 and envs.autoreset_mode is gymnasium.vector.AutoresetMode.SAME_STEP
    finally:
        envs.close()
