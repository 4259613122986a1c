"""A push stores every array of its feed or none; errors name the data and the bytes."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kernelgym.core import CUDADataManager, DataFeed, rng
from kernelgym.core.arrays import SUPPORTED_DTYPES

NUM_ENVS, NUM_AGENTS, EPISODE_LENGTH = 3, 2, 4

GOOD_DTYPES = st.sampled_from(SUPPORTED_DTYPES)
# each bad kind with the words its error must contain
BAD_ARRAYS = st.sampled_from(
    [
        (lambda: np.zeros(NUM_ENVS, ">f4"), "native byte order"),
        (lambda: np.zeros(NUM_ENVS, np.dtype(np.int64).newbyteorder()), "native byte order"),
        (lambda: np.zeros(NUM_ENVS, np.longdouble), "expected one of the dtypes"),  # float128 on x86-64
        (lambda: np.zeros(NUM_ENVS, np.dtype("M8[s]")), "expected numeric or bool data"),
        (lambda: np.zeros(NUM_ENVS, np.dtype("m8[s]")), "expected numeric or bool data"),
        (lambda: np.array(["a", "b", "c"]), "expected numeric or bool data"),
    ]
)
ATTRIBUTES = st.fixed_dictionaries(
    {
        "save_copy_and_apply_at_reset": st.booleans(),
        "log_data_across_episode": st.booleans(),
    }
)


@st.composite
def feeds(draw, prefix):
    """(entries, bad) where entries = [(name, array, attributes)] and bad = [(name, message)]."""
    entries, bad = [], []
    for index in range(draw(st.integers(1, 4))):
        name = f"{prefix}{index}"
        attributes = draw(ATTRIBUTES)
        if draw(st.booleans()):
            make, message = draw(BAD_ARRAYS)
            entries.append((name, make(), attributes))
            bad.append((name, message))
        else:
            shape = (NUM_ENVS, *draw(st.lists(st.integers(1, 3), max_size=2)))
            entries.append((name, np.ones(shape, draw(GOOD_DTYPES)), attributes))
    return entries, bad


class PushMachine(RuleBasedStateMachine):
    """Random feeds, some with bad arrays, against a model of what must be stored."""

    def __init__(self):
        super().__init__()
        self.dm = CUDADataManager(
            num_agents=NUM_AGENTS, num_envs=NUM_ENVS, episode_length=EPISODE_LENGTH, backend="cpu"
        )
        self.model = {name: np.array(values) for name, values in self.dm.host_data.items()}
        self.reset_list, self.log_list = [], []
        self.pushes = 0

    @rule(data=st.data(), torch_accessible=st.booleans())
    def push(self, data, torch_accessible):
        self.pushes += 1
        entries, bad = data.draw(feeds(prefix=f"p{self.pushes}_"))
        feed = DataFeed()
        for name, values, attributes in entries:
            feed.add_data(name, values, **attributes)
        if bad:
            with pytest.raises(TypeError) as error:
                self.dm.push_data_to_device(feed, torch_accessible=torch_accessible)
            assert any(
                str(error.value).startswith(f"{name}: ") and message in str(error.value) for name, message in bad
            ), str(error.value)
            return
        self.dm.push_data_to_device(feed, torch_accessible=torch_accessible)
        for name, values, attributes in entries:
            self.model[name] = values
            if attributes["save_copy_and_apply_at_reset"]:
                self.model[name + "_at_reset"] = values
                self.reset_list.append(name)
            if attributes["log_data_across_episode"]:
                self.model[name + "_for_log"] = np.zeros((EPISODE_LENGTH + 1, *values.shape), values.dtype)
                self.log_list.append(name)
            assert self.dm.is_data_on_device_via_torch(name) == torch_accessible

    @rule(data=st.data())
    def push_a_stored_name_again(self, data):
        name = data.draw(st.sampled_from(sorted(self.model)))
        with pytest.raises(ValueError, match=f"{name}: already used"):
            self.dm.push_data_to_device({name: {"data": np.zeros(NUM_ENVS)}})

    @invariant()
    def stored_is_exactly_the_model(self):
        assert sorted(self.dm.host_data) == sorted(self.model)
        for name, values in self.model.items():
            pulled = self.dm.pull_data_from_device(name)
            assert pulled.dtype == values.dtype and pulled.tobytes() == values.tobytes(), name
        assert self.dm.reset_data_list == self.reset_list and self.dm.log_data_list == self.log_list


TestPushMachine = PushMachine.TestCase
TestPushMachine.settings = settings(max_examples=30, stateful_step_count=8, deadline=None)


def test_an_array_too_large_to_allocate_names_itself_and_its_bytes_and_stores_nothing():
    dm = CUDADataManager(num_envs=2, episode_length=10**13, backend="cpu")
    feed = DataFeed()
    feed.add_data("fine", np.zeros(2))
    feed.add_data("huge", np.zeros((2, 4), np.float64), log_data_across_episode=True)
    before = sorted(dm.host_data)
    with pytest.raises(MemoryError, match=r"huge_for_log: cannot allocate 640,000,000,000,064 bytes"):
        dm.push_data_to_device(feed)
    assert sorted(dm.host_data) == before and dm.log_data_list == []


def test_a_huge_num_envs_is_named_with_the_bytes_it_needs():
    with pytest.raises(MemoryError, match=r"num_envs: cannot allocate 80,000,000,000,000 bytes"):
        CUDADataManager(num_envs=10**13, backend="cpu")


@given(seed=st.integers(max_value=-1) | st.lists(st.integers(max_value=-1), min_size=1, max_size=3))
def test_negative_seeds_are_refused_naming_the_seed(seed):
    with pytest.raises(ValueError, match=r"seed: expected None, an int >= 0 or a sequence of them, got"):
        rng.seed_streams(seed, 2)


@given(seed=st.floats() | st.text(max_size=3) | st.booleans())
def test_non_integer_seeds_are_refused_naming_the_type(seed):
    with pytest.raises(TypeError, match=f"seed: expected None, an int >= 0 .* got {type(seed).__name__}"):
        rng.seed_streams(seed, 2)
