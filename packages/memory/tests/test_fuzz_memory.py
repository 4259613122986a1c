"""Issue 25's fuzz test of the memories: hostile arguments to every public call, against a reference.

A ``RuleBasedStateMachine`` drives a ``RandomMemory`` or ``PrioritizedMemory`` with
arguments a careless caller or a hostile file gives (huge, negative, float, bool, None,
str, nan and out-of-dtype numbers, wrong shapes and dtypes, attached foreign storage,
garbage files). Every call must either raise ``TypeError``/``ValueError``/``KeyError``/
``RuntimeError`` whose message names the argument and leave the memory as it was, or give
the result of a plain Python ring buffer (``RingBuffer``) and priority list.
"""

import math
import os
import shutil
import tempfile

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from test_memory_stateful import RingBuffer

from kernelgym.memory import PrioritizedMemory, RandomMemory

pytestmark = pytest.mark.timeout(120)

#: ints a careless caller passes for a size or an index (beyond 2**40 rows a call is refused
#: before any allocation: medium sizes would test the machine's allocator, not the memory)
hostile_ints = st.one_of(
    st.integers(-3, 14),
    st.sampled_from([2**41, 2**63, 2**64, 2**70, -(2**63)]),
)
hostile_scalars = st.one_of(
    hostile_ints,
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=2),
    st.sampled_from([np.int64(2), np.float32(1.5), 1 + 2j]),
)
# priorities: finite ones beyond float32 (1e39) and beyond float64 (10**400) among the usual ones
hostile_priorities = st.one_of(
    st.floats(0, 1e6),
    st.sampled_from([0.0, 1e39, 1e300, -1.0, math.inf, math.nan, 2**70, 10**400, True, None, "a", 1 + 2j]),
)


def names_argument(error, *arguments):
    """Whether the error's message names one of ``arguments`` (an argument or a tensor name)."""
    return any(argument in str(error) for argument in arguments)


class HostileMemory(RuleBasedStateMachine):
    @initialize(
        memory_size=st.integers(1, 4),
        num_envs=st.integers(1, 3),
        prioritized=st.booleans(),
    )
    def create(self, memory_size, num_envs, prioritized):
        cls = PrioritizedMemory if prioritized else RandomMemory
        self.make = lambda: cls(memory_size, num_envs, device="cpu", seed=0)
        self.memory = self.make()
        self.memory.create_tensor("obs", 2)
        self.memory.create_tensor("action", 1, torch.int64)
        self.prioritized = prioritized
        self.capacity = memory_size * num_envs
        self.model = RingBuffer(self.capacity)
        self.counter = 0
        self.directory = tempfile.mkdtemp()

    def teardown(self):
        shutil.rmtree(getattr(self, "directory", ""), ignore_errors=True)

    # -- writes --------------------------------------------------------------------------------

    @rule(
        count=st.one_of(st.integers(0, 14), st.sampled_from([2**41])),
        obs_shape=st.sampled_from(["ok", "flat", "wide", "scalar"]),
        action_dtype=st.sampled_from([torch.int64, torch.int32, torch.float32]),
        kind=st.sampled_from(["tensor", "numpy", "list", "none"]),
    )
    def add(self, count, obs_shape, action_dtype, kind):
        small = min(count, 64)  # a huge count is described, never allocated
        rows = [(float(self.counter + k), float(-self.counter - k)) for k in range(small)]
        obs = torch.tensor(rows, dtype=torch.float32).reshape(small, 2)
        if obs_shape == "flat":
            obs = obs.reshape(-1)
        elif obs_shape == "wide":
            obs = torch.zeros(small, 3)
        elif obs_shape == "scalar":
            obs = torch.tensor(1.0)
        action = torch.arange(self.counter, self.counter + small).to(action_dtype).unsqueeze(1)
        if kind == "numpy":
            obs = obs.numpy()
        elif kind == "list":
            obs = obs.tolist()
        elif kind == "none":
            obs = None
        if count == 2**41:
            obs = torch.zeros(1, 2).expand(count, 2)  # a huge batch as a view, no storage
            action = torch.zeros(1, 1, dtype=action_dtype).expand(count, 1)
        valid = (
            kind in ("tensor", "numpy")
            and (obs_shape == "ok" or obs_shape == "flat" and count == 1)  # a flat (2,) is one sample
            # int32 and float32 actions hold small integers: exact casts into int64, stored
            and 1 <= count <= self.capacity
        )
        before = self.snapshot()
        try:
            self.memory.add_samples(obs=obs, action=action)
        except (TypeError, ValueError) as error:
            assert not valid, f"refused a valid batch: {error}"
            assert names_argument(error, "'obs'", "'action'"), error
            assert self.snapshot() == before
            return
        assert valid, "accepted an invalid batch"
        self.model.add([(row, self.counter + k) for k, row in enumerate(rows)])
        self.counter += count

    @rule(data=st.data())
    @precondition(lambda self: self.prioritized)
    def update_priorities(self, data):
        length = data.draw(st.integers(0, 3))
        index = st.one_of(st.integers(-1, self.capacity), hostile_ints)
        indexes = data.draw(st.lists(index, min_size=length, max_size=length))
        extra = data.draw(st.integers(0, 1))  # sometimes one priority too many
        priorities = data.draw(st.lists(hostile_priorities, min_size=length, max_size=length + extra))
        before = self.memory.get_priorities()
        written = self.model.written()
        valid = (
            len(priorities) == len(indexes)
            and all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < written for i in indexes)
            and all(isinstance(p, (int, float)) and not isinstance(p, bool) and 0 <= p <= 1e300 for p in priorities)
        )
        try:
            self.memory.update_priorities(indexes, priorities)
        except (TypeError, ValueError) as error:
            assert not valid, f"refused valid priorities {priorities} at {indexes}: {error}"
            assert names_argument(error, "indexes", "priorities"), error
            assert torch.equal(self.memory.get_priorities(), before)
            return
        assert valid, f"accepted priorities {priorities!r} at {indexes!r}"
        got = self.memory.get_priorities()
        for index in set(indexes):  # a repeated index keeps one of its priorities
            expected = [(float(p) + 1e-6) ** 0.6 for i, p in zip(indexes, priorities) if i == index]
            assert any(math.isclose(float(got[index]), weight, rel_tol=1e-12) for weight in expected)

    @rule()
    def reset(self):
        self.memory.reset()
        self.model.reset()

    # -- reads ---------------------------------------------------------------------------------

    @rule(batch_size=hostile_scalars, mini_batches=hostile_scalars, sequence_length=hostile_scalars)
    def sample(self, batch_size, mini_batches, sequence_length):
        try:
            batches = self.memory.sample(["obs", "action"], batch_size, mini_batches, sequence_length)
        except (TypeError, ValueError) as error:
            assert names_argument(error, "batch_size", "mini_batches", "sequence_length", "memory is empty"), error
            return
        assert isinstance(batch_size, (int, np.integer)) and not isinstance(batch_size, bool)
        rows = int(batch_size) * int(sequence_length)
        assert sum(batch[0].shape[0] for batch in batches) == rows and len(batches) == int(mini_batches)
        stored = {row for row, _ in self.model.cells[: self.model.written()]}
        for obs, action in batches:
            for values, taken in zip(obs.tolist(), action[:, 0].tolist()):
                assert tuple(values) in stored and taken == values[0]  # rows from written cells, whole

    @rule(indexes=st.one_of(st.lists(hostile_scalars, max_size=4), hostile_scalars, st.just([[0]])))
    def sample_by_index(self, indexes):
        try:
            ((obs, action),) = self.memory.sample_by_index(["obs", "action"], indexes)
        except (TypeError, ValueError) as error:
            assert names_argument(error, "indexes", "mini_batches"), error
            return
        assert isinstance(indexes, list)
        assert all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in indexes)
        assert all(0 <= i < self.model.written() for i in indexes)
        expected = [self.model.cells[int(i)] for i in indexes]
        assert [(tuple(o), a) for o, a in zip(obs.tolist(), action[:, 0].tolist())] == expected

    @rule(names=st.sampled_from(["obs", ["nothing"], [None], None, [["obs"]]]))
    def sample_bad_names(self, names):
        with pytest.raises((TypeError, KeyError)) as caught:
            self.memory.sample_all(names)
        assert names_argument(caught.value, "names", "name: no tensor")

    # -- sharing and files ---------------------------------------------------------------------

    @rule(attach=st.booleans())
    def share_memory(self, attach):
        if attach and "foreign" not in self.memory.tensors:
            buffer = np.zeros((self.memory.memory_size, self.memory.num_envs, 1), dtype=np.float32)
            self.memory.attach_tensor("foreign", torch.from_numpy(buffer))
        shared = self.memory.get_tensor_by_name("obs").is_shared()
        try:
            self.memory.share_memory()
        except RuntimeError as error:
            assert "'foreign'" in str(error) and "attach" in str(error)  # names the attached tensor
            assert self.memory.get_tensor_by_name("obs").is_shared() == shared  # refused before moving any
            return
        assert "foreign" not in self.memory.tensors
        assert all(tensor.is_shared() for tensor in self.memory.tensors.values())

    @rule(
        format=st.sampled_from(["pt", "npz", "csv"]),
        damage=st.sampled_from([None, "truncate", "garbage", "missing"]),
    )
    @precondition(lambda self: "foreign" not in self.memory.tensors)
    def save_and_load(self, format, damage):
        path = self.memory.save(self.directory, format)
        if damage == "truncate":
            with open(path, "r+b") as file:
                file.truncate(os.path.getsize(path) // 2)
        elif damage == "garbage":
            with open(path, "wb") as file:
                file.write(b"\x00not a memory file" * 3)
        elif damage == "missing":
            os.remove(path)
        copy = self.make()
        copy.create_tensor("obs", 2)
        copy.create_tensor("action", 1, torch.int64)
        try:
            copy.load(path)
        except (ValueError, OSError) as error:  # FileNotFoundError is an OSError
            assert damage is not None, f"a sound {format} file was refused: {error}"
            assert names_argument(error, "path", path), error
            assert len(copy) == 0
            return
        assert damage in (None, "truncate"), f"loaded a {damage} file"
        self.memory = copy  # goes on: the invariant holds it to the reference (a cut file too)

    # -- the reference -------------------------------------------------------------------------

    def snapshot(self):
        """Indexes and raw storage (bytes: unwritten float cells are NaN, which never compares equal)."""
        views = self.memory.tensors_view
        return (
            len(self.memory),
            self.memory.memory_index,
            self.memory.env_index,
            [views[name].numpy().tobytes() for name in ("obs", "action")],
        )

    @invariant()
    def matches_the_ring_buffer(self):
        written = self.model.written()
        assert len(self.memory) == written
        assert self.memory.memory_index * self.memory.num_envs + self.memory.env_index == self.model.position
        if written:
            ((obs, action),) = self.memory.sample_by_index(["obs", "action"], list(range(written)))
            assert [(tuple(o), a) for o, a in zip(obs.tolist(), action[:, 0].tolist())] == self.model.cells[:written]


HostileMemory.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestHostileMemory = HostileMemory.TestCase
