"""The memory against a plain Python ring buffer, over random adds, samples, saves, loads and resets."""

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
