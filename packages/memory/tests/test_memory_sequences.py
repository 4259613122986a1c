"""Sequences never cross an episode end or the write pointer, against a write-counter reference.

Every test memory stores ``stamp``, the running count of cells written before each one.
Step k of a sequence in the same environment is the write ``stamp + k * num_envs``; it is
valid if that write is still in memory and no episode ended between.
"""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgym.memory import PrioritizedMemory, RandomMemory, SequenceMemory


@st.composite
def histories(draw):
    memory_size = draw(st.integers(1, 6))
    num_envs = draw(st.integers(1, 4))
    capacity = memory_size * num_envs
    adds = draw(st.lists(st.integers(1, capacity), min_size=1, max_size=8))
    ends = draw(st.lists(st.booleans(), min_size=sum(adds), max_size=sum(adds)))
    return memory_size, num_envs, adds, ends


def fill(memory, adds, ends, with_episode_tensor=True):
    memory.create_tensor("stamp", 1, torch.int64)
    if with_episode_tensor:
        memory.create_tensor("terminated", 1, torch.bool)
        memory.create_tensor("truncated", 1, torch.bool)
    written = 0
    for n in adds:
        flags = torch.tensor(ends[written : written + n])
        samples = {"stamp": torch.arange(written, written + n)}
        if with_episode_tensor:  # split the ends between the two tensors
            samples |= {
                "terminated": flags & (torch.arange(n) % 2 == 0),
                "truncated": flags & (torch.arange(n) % 2 == 1),
            }
        memory.add_samples(**samples)
        written += n
    return written


class Reference:
    """What a sequence must contain, computed from stamps alone."""

    def __init__(self, written, capacity, num_envs, ends):
        self.written, self.capacity, self.num_envs, self.ends = written, capacity, num_envs, ends

    def in_memory(self, stamp):
        return max(0, self.written - self.capacity) <= stamp < self.written

    def expected(self, start, first_step, length):
        stamps, valid = [], []
        for k in range(first_step, first_step + length):
            stamp = start + k * self.num_envs
            steps_between = range(k, 0) if k < 0 else range(0, k)  # same env only
            between = [start + j * self.num_envs for j in steps_between]
            ok = self.in_memory(stamp) and not any(self.ends[s] for s in between)
            stamps.append(stamp)
            valid.append(ok)
        return stamps, valid

    def check(self, sequence_stamps, mask, first_step):
        start = sequence_stamps[-first_step]
        assert self.in_memory(start)
        stamps, valid = self.expected(start, first_step, len(sequence_stamps))
        assert mask == valid
        run = [i for i, ok in enumerate(valid) if ok]
        assert run == list(range(run[0], run[-1] + 1))  # one run around the start
        for i, stamp in enumerate(sequence_stamps):
            nearest = min(max(i, run[0]), run[-1])
            assert stamp == stamps[nearest]


@settings(max_examples=60)
@given(history=histories(), length=st.integers(2, 5), burn_in=st.integers(0, 3), with_ends=st.booleans())
def test_sequence_memory_matches_the_reference(history, length, burn_in, with_ends):
    memory_size, num_envs, adds, ends = history
    memory = SequenceMemory(memory_size, num_envs, device="cpu", seed=1, sequence_length=length, burn_in=burn_in)
    written = fill(memory, adds, ends, with_ends)
    reference = Reference(written, memory_size * num_envs, num_envs, ends if with_ends else [False] * written)
    ((stamps, mask),) = memory.sample(["stamp"], 12)
    assert stamps.shape == (12, burn_in + length, 1) and mask.shape == (12, burn_in + length)
    for sequence, sequence_mask in zip(stamps.squeeze(-1).tolist(), mask.tolist()):
        reference.check(sequence, sequence_mask, -burn_in)


@settings(max_examples=40)
@given(history=histories(), length=st.integers(2, 4), memory_type=st.sampled_from([RandomMemory, PrioritizedMemory]))
def test_random_and_prioritized_sequences_match_the_reference(history, length, memory_type):
    memory_size, num_envs, adds, ends = history
    memory = memory_type(memory_size, num_envs, device="cpu", seed=2)
    written = fill(memory, adds, ends)
    reference = Reference(written, memory_size * num_envs, num_envs, ends)
    ((stamps, mask),) = memory.sample(["stamp"], 9, sequence_length=length, return_mask=True)
    for sequence, sequence_mask in zip(stamps.view(9, length).tolist(), mask.view(9, length).tolist()):
        reference.check(sequence, sequence_mask, 0)


@settings(max_examples=60)
@given(history=histories(), length=st.integers(2, 4), mini_batches=st.integers(1, 3))
def test_sample_all_windows_cover_every_written_cell_once_within_episodes(history, length, mini_batches):
    memory_size, num_envs, adds, ends = history
    memory = RandomMemory(memory_size, num_envs, device="cpu")
    written = fill(memory, adds, ends)
    reference = Reference(written, memory_size * num_envs, num_envs, ends)
    windows_count = len(memory.sample_all(["stamp"], sequence_length=length)[0][0]) // length
    batches = memory.sample_all(
        ["stamp"], mini_batches=min(mini_batches, windows_count), sequence_length=length, return_mask=True
    )
    stamps = torch.cat([batch[0] for batch in batches]).view(-1, length).tolist()
    masks = torch.cat([batch[1] for batch in batches]).view(-1, length).tolist()
    valid_stamps = [s for window, mask in zip(stamps, masks) for s, ok in zip(window, mask) if ok]
    assert sorted(valid_stamps) == [s for s in range(written) if reference.in_memory(s)]
    previous = None
    for window, mask in zip(stamps, masks):
        real = [s for s, ok in zip(window, mask) if ok]
        assert mask == [True] * len(real) + [False] * (length - len(real))
        assert real == list(range(real[0], real[0] + num_envs * len(real), num_envs))  # one env, consecutive
        assert not any(ends[s] for s in real[:-1])  # an episode may only end at the last step
        assert all(s == real[-1] for s in window[len(real) :])  # padding repeats the last row
        if previous is not None and real[0] == previous[-1] + num_envs:
            assert len(previous) == length or ends[previous[-1]]  # a window is cut only when full or at an end
        previous = real


def test_sequences_of_a_partly_written_memory_stop_at_the_write_pointer():
    memory = RandomMemory(10, 1, device="cpu", seed=0)
    memory.create_tensor("x", 1)
    memory.add_samples(x=torch.arange(4.0))
    ((x, mask),) = memory.sample(["x"], 50, sequence_length=6, return_mask=True)
    assert not x.isnan().any()
    for row, ok in zip(x.view(50, 6).tolist(), mask.view(50, 6).tolist()):
        assert sum(ok) == 4 - row[0]


def test_sequences_without_a_mask_request_keep_the_seed_layout():
    memory = RandomMemory(10, 2, device="cpu", seed=0)
    memory.create_tensor("x", 1)
    for step in range(10):
        memory.add_samples(x=torch.full((2,), float(step)))
    batches = memory.sample(["x"], 6, mini_batches=4, sequence_length=3)
    assert [len(batch) for batch in batches] == [1, 1, 1, 1]
    assert [len(batch[0]) for batch in batches] == [6, 6, 3, 3]


@pytest.mark.parametrize("mini_batches", [1, 2])
def test_sequence_memory_burn_in_stops_at_the_episode_start(mini_batches):
    memory = SequenceMemory(8, 1, device="cpu", seed=0, sequence_length=2, burn_in=3)
    memory.create_tensor("x", 1, torch.int64)
    memory.create_tensor("terminated", 1, torch.bool)
    memory.add_samples(x=torch.arange(6), terminated=torch.tensor([False, True, False, False, False, False]))
    for x, mask in memory.sample(["x"], 20, mini_batches=mini_batches):
        for row, ok in zip(x.squeeze(-1).tolist(), mask.tolist()):
            start = row[3]
            assert ok[3]
            assert all(row[i] >= 2 for i in range(3) if ok[i]) or start <= 1
