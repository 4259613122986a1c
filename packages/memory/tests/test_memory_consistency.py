"""A failing add changes nothing; a save taken while another thread adds is a consistent snapshot."""

import os
import threading

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgym.memory import Memory, PrioritizedMemory, RandomMemory

CLASSES = [Memory, RandomMemory, PrioritizedMemory]


def state(memory):
    tensors = {name: t.clone().view(torch.uint8) for name, t in memory.tensors.items()}
    priorities = memory.get_priorities() if isinstance(memory, PrioritizedMemory) else None
    return memory.memory_index, memory.env_index, memory.filled, len(memory), tensors, priorities


def assert_same(before, after):
    assert before[:4] == after[:4]
    assert all(torch.equal(before[4][name], after[4][name]) for name in before[4])
    assert before[5] is None or torch.equal(before[5], after[5])


def exporting_memory(cls, directory, memory_size=3, num_envs=2):
    blocker = os.path.join(directory, "not-a-folder")
    open(blocker, "w").close()  # exports go under <blocker>/memories/: makedirs fails
    memory = cls(memory_size, num_envs, device="cpu", export=True, export_directory=blocker)
    memory.create_tensor("obs", 2)
    memory.create_tensor("step", 1, torch.int64)
    return memory


@pytest.mark.parametrize("cls", CLASSES)
@settings(max_examples=30, deadline=None)
@given(sizes=st.lists(st.integers(1, 6), min_size=1, max_size=8))
def test_an_add_whose_export_fails_changes_nothing(tmp_path_factory, cls, sizes):
    memory = exporting_memory(cls, str(tmp_path_factory.mktemp("export")))
    written = 0
    for size in sizes:
        before = state(memory)
        values = torch.arange(written, written + size)
        try:
            memory.add_samples(obs=values.float().unsqueeze(1).expand(size, 2), step=values)
        except OSError:
            assert before[0] * 2 + before[1] + size >= 6  # only an add that fills the memory exports
            assert_same(before, state(memory))
        else:
            assert before[0] * 2 + before[1] + size < 6  # no export was due
            written += size


@pytest.mark.parametrize("cls", CLASSES)
def test_an_advance_whose_export_fails_leaves_the_indexes(tmp_path, cls):
    memory = exporting_memory(cls, str(tmp_path))
    memory.advance(4)
    before = state(memory)
    with pytest.raises(OSError):
        memory.advance(3)
    assert_same(before, state(memory))


def test_an_export_that_succeeds_holds_the_filled_memory_and_the_rest_wraps(tmp_path):
    memory = RandomMemory(3, 2, device="cpu", export=True, export_directory=str(tmp_path), export_format="csv")
    memory.create_tensor("step", 1, torch.int64)
    memory.add_samples(step=torch.arange(4))
    memory.add_samples(step=torch.arange(4, 8))  # fills at 6, exports, then writes 6 and 7 at the start
    (path,) = [os.path.join(tmp_path, "memories", name) for name in os.listdir(tmp_path / "memories")]
    exported = RandomMemory(3, 2, device="cpu")
    exported.load(path)
    assert exported.filled and exported.sample_all(["step"])[0][0].view(-1).tolist() == list(range(6))
    assert memory.sample_all(["step"])[0][0].view(-1).tolist() == list(range(2, 8))


def consistent(memory, num_envs):
    """Rows written whole, oldest first, by steps t, t + 1, ... in every tensor."""
    if not len(memory):
        return True
    obs, step = memory.sample_all(["obs", "step"])[0]
    rows = step.view(-1, num_envs)
    first = int(rows[0, 0])
    expected = torch.arange(first, first + rows.shape[0]).unsqueeze(1).expand_as(rows)
    return torch.equal(rows, expected) and torch.equal(obs, step.float().expand_as(obs))


@pytest.mark.parametrize("format", ["pt", "npz", "csv"])
def test_saves_during_adds_in_another_thread_are_consistent_snapshots(tmp_path, format):
    memory_size, num_envs, width = 8, 32, 512
    memory = PrioritizedMemory(memory_size, num_envs, device="cpu")
    memory.create_tensor("obs", width)
    memory.create_tensor("step", 1, torch.int64)
    stop = threading.Event()

    def add_rows():
        step = 0
        while not stop.is_set():
            memory.add_samples(obs=torch.full((num_envs, width), float(step)), step=torch.full((num_envs,), step))
            step += 1

    adder = threading.Thread(target=add_rows)
    adder.start()
    try:
        paths = [memory.save(str(tmp_path), format) for _ in range(12)]
    finally:
        stop.set()
        adder.join()
    for path in paths:
        copy = PrioritizedMemory(memory_size, num_envs, device="cpu")
        copy.load(path)
        assert consistent(copy, num_envs), path
        assert torch.equal(copy.get_priorities()[: len(copy)], torch.ones(len(copy), dtype=torch.float64))
