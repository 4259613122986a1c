"""The memory against a plain Python ring buffer, over random adds (some failing), samples, saves, loads and resets."""

import os
import shutil
import tempfile

import torch
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kernelgym.memory import PrioritizedMemory, RandomMemory


class RingBuffer:
    """The reference: a list of cells written in order, wrapping at the end."""

    def __init__(self, capacity):
        self.cells = [None] * capacity
        self.position = 0
        self.filled = False

    def add(self, rows):
        for row in rows:
            self.cells[self.position] = row
            self.position += 1
            if self.position == len(self.cells):
                self.position, self.filled = 0, True

    def written(self):
        return len(self.cells) if self.filled else self.position

    def oldest_first(self):
        if not self.filled:
            return self.cells[: self.position]
        return self.cells[self.position :] + self.cells[: self.position]

    def reset(self):
        self.position, self.filled = 0, False


class MemoryMachine(RuleBasedStateMachine):
    @initialize(
        memory_size=st.integers(1, 5),
        num_envs=st.integers(1, 4),
        prioritized=st.booleans(),
        replacement=st.booleans(),
    )
    def create(self, memory_size, num_envs, prioritized, replacement):
        kwargs = {} if prioritized else {"replacement": replacement}
        self.make = lambda: (PrioritizedMemory if prioritized else RandomMemory)(
            memory_size, num_envs, device="cpu", seed=0, **kwargs
        )
        self.memory = self.make()
        self.memory.create_tensor("obs", (2,), keep_dimensions=True)
        self.memory.create_tensor("action", 1, torch.int64)
        self.model = RingBuffer(memory_size * num_envs)
        self.counter = 0
        self.directory = tempfile.mkdtemp()

    def teardown(self):
        shutil.rmtree(getattr(self, "directory", ""), ignore_errors=True)

    def rows(self, obs, action):
        return [(tuple(o), a) for o, a in zip(obs.tolist(), action.view(-1).tolist())]

    @rule(data=st.data())
    def add(self, data):
        capacity = len(self.model.cells)
        n = data.draw(st.integers(1, capacity))
        single = n == 1 and data.draw(st.booleans())
        obs = torch.arange(self.counter, self.counter + n, dtype=torch.float32).unsqueeze(1) * torch.tensor([1.0, -1.0])
        action = torch.arange(self.counter, self.counter + n).unsqueeze(1)
        self.counter += n
        if single:
            self.memory.add_samples(obs=obs[0], action=action[0])
        else:
            self.memory.add_samples(obs=obs, action=action.view(-1) if data.draw(st.booleans()) else action)
        self.model.add(self.rows(obs, action))

    def state(self):
        memory = self.memory
        tensors = {name: t.clone().view(torch.uint8) for name, t in memory.tensors.items()}
        priorities = memory.get_priorities() if isinstance(memory, PrioritizedMemory) else torch.zeros(0)
        return memory._position, memory.filled, tensors, priorities

    def assert_state(self, before):
        after = self.state()
        assert before[:2] == after[:2] and torch.equal(before[3], after[3])
        assert all(torch.equal(before[2][name], after[2][name]) for name in before[2])

    @rule(data=st.data())
    def add_whose_export_fails(self, data):
        """An add that fills the memory exports; when the export fails, nothing changes."""
        capacity = len(self.model.cells)
        n = data.draw(st.integers(1, capacity))
        blocker = os.path.join(self.directory, "blocker")
        open(blocker, "w").close()  # the export folder cannot be made under a file
        self.memory.export, self.memory.export_directory = True, blocker
        obs = torch.full((n, 2), -1.0)
        action = torch.full((n, 1), -1)
        before = self.state()
        try:
            self.memory.add_samples(obs=obs, action=action)
        except OSError:
            assert self.model.position + n >= capacity
            self.assert_state(before)
        else:
            assert self.model.position + n < capacity
            self.model.add(self.rows(obs, action))
        finally:
            self.memory.export = False

    @rule(format=st.sampled_from(["pt", "npz", "csv"]), at=st.floats(0.0, 1.0), bit=st.integers(0, 7))
    def load_a_corrupted_file(self, format, at, bit):
        """A file with one flipped bit is refused, leaving the memory unchanged, or loads the same memory."""
        path = self.memory.save(self.directory, format)
        self.memory.load(path)  # csv restores unwritten cells as NaN: compare with what the file holds
        expected = self.state()
        data = bytearray(open(path, "rb").read())
        data[min(int(at * len(data)), len(data) - 1)] ^= 1 << bit
        open(path, "wb").write(bytes(data))
        try:
            self.memory.load(path)
        except ValueError:
            pass
        self.assert_state(expected)

    @precondition(lambda self: self.model.written() > 0)
    @rule(batch_size=st.integers(1, 12), mini_batches=st.integers(1, 3))
    def sample(self, batch_size, mini_batches):
        memory, written = self.memory, self.model.written()
        if not getattr(memory, "_replacement", True):
            batch_size = min(batch_size, written)
        mini_batches = min(mini_batches, batch_size)
        batches = memory.sample(["obs", "action"], batch_size, mini_batches=mini_batches)
        assert len(batches) == mini_batches
        obs = torch.cat([batch[0] for batch in batches])
        action = torch.cat([batch[1] for batch in batches])
        indexes = memory.get_sampling_indexes().tolist()
        assert len(indexes) == batch_size and all(0 <= i < written for i in indexes)
        assert self.rows(obs, action) == [self.model.cells[i] for i in indexes]

    @precondition(lambda self: self.model.written() > 0)
    @rule(mini_batches=st.integers(1, 3))
    def sample_all(self, mini_batches):
        mini_batches = min(mini_batches, self.model.written())
        batches = self.memory.sample_all(["obs", "action"], mini_batches=mini_batches)
        obs = torch.cat([batch[0] for batch in batches])
        action = torch.cat([batch[1] for batch in batches])
        assert self.rows(obs, action) == self.model.oldest_first()

    @rule(format=st.sampled_from(["pt", "npz", "csv"]), into_new=st.booleans())
    def save_and_load(self, format, into_new):
        path = self.memory.save(self.directory, format)
        if into_new:
            self.memory = self.make()
        self.memory.load(path)

    @rule()
    def reset(self):
        self.memory.reset()
        self.model.reset()

    @invariant()
    def indexes_match(self):
        if not hasattr(self, "model"):
            return
        memory, model = self.memory, self.model
        assert len(memory) == model.written()
        assert memory.filled == model.filled
        assert memory.memory_index * memory.num_envs + memory.env_index == model.position


MemoryMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
test_memory_matches_a_ring_buffer = MemoryMachine.TestCase
