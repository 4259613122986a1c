"""save/load: every format restores what sampling reads; loading is safe and all-or-nothing."""

import os

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgym.memory import PrioritizedMemory, RandomMemory

FORMATS = ["pt", "npz", "csv"]


def filled_memory(steps=5, memory_size=3, num_envs=2, cls=RandomMemory):
    memory = cls(memory_size, num_envs, device="cpu", seed=0)
    memory.create_tensor("obs", (2, 2), keep_dimensions=True)
    memory.create_tensor("actions", 1, torch.int64)
    memory.create_tensor("terminated", 1, torch.bool)
    memory.create_tensor("half", 1, torch.bfloat16)
    for step in range(steps):
        memory.add_samples(
            obs=torch.rand(num_envs, 2, 2, dtype=torch.float32) / 3,
            actions=torch.tensor([step, -step]).view(2, 1)[:num_envs],
            terminated=torch.tensor([[step % 2 == 0], [False]])[:num_envs],
            half=torch.tensor([[step / 7], [1e-3]], dtype=torch.bfloat16)[:num_envs],
        )
    return memory


@pytest.mark.parametrize("format", FORMATS)
@pytest.mark.parametrize("steps", [2, 3, 5])
def test_load_restores_tensors_indexes_filled_and_views(tmp_path, format, steps):
    memory = filled_memory(steps)
    memory.add_samples(
        obs=torch.zeros(1, 2, 2),
        actions=torch.zeros(1, 1, dtype=torch.int64),
        terminated=torch.zeros(1, 1, dtype=torch.bool),
        half=torch.zeros(1, 1, dtype=torch.bfloat16),
    )
    path = memory.save(str(tmp_path), format)
    for copy in (RandomMemory(3, 2, device="cpu"), filled_memory(1)):
        view = copy.tensors_view.get("obs")
        copy.load(path)
        assert (copy.memory_index, copy.env_index, copy.filled, len(copy)) == (
            memory.memory_index,
            memory.env_index,
            memory.filled,
            len(memory),
        )
        for name in memory.get_tensor_names():
            assert torch.equal(copy.sample_all([name])[0][0], memory.sample_all([name])[0][0])
            assert copy.tensors_keep_dimensions[name] == memory.tensors_keep_dimensions[name]
        if view is not None:  # loaded in place: earlier views see the loaded data
            assert copy.get_tensor_by_name("obs", keepdim=False) is view
        indexes = torch.arange(len(memory))
        assert torch.equal(copy.sample_by_index(["obs"], indexes)[0][0], memory.sample_by_index(["obs"], indexes)[0][0])


@pytest.mark.parametrize("format", FORMATS)
def test_prioritized_memory_round_trips_its_priorities(tmp_path, format):
    memory = filled_memory(cls=PrioritizedMemory)
    memory.update_priorities(torch.tensor([0, 3]), torch.tensor([4.0, 0.5]))
    copy = PrioritizedMemory(3, 2, device="cpu")
    copy.load(memory.save(str(tmp_path), format))
    assert torch.equal(copy.get_priorities(), memory.get_priorities())


def test_prioritized_memory_loads_a_random_memory_file_with_equal_priorities(tmp_path):
    path = filled_memory(steps=2).save(str(tmp_path))
    copy = PrioritizedMemory(3, 2, device="cpu")
    copy.load(path)
    assert copy.get_priorities().tolist() == [1.0] * 4 + [0.0] * 2


class Boom:
    def __reduce__(self):
        return (os.system, ("touch " + Boom.marker,))


def test_loading_a_pt_file_never_runs_code_from_it(tmp_path):
    Boom.marker = str(tmp_path / "pwned")
    path = tmp_path / "evil.pt"
    torch.save({"metadata": Boom(), "tensors": {}, "extra": {}}, path)
    memory = filled_memory()
    with pytest.raises(ValueError, match="not a valid pt memory file"):
        memory.load(str(path))
    assert not os.path.exists(Boom.marker)


def test_loading_an_npz_with_pickled_objects_is_refused(tmp_path):
    path = tmp_path / "evil.npz"
    np.savez(path, metadata=np.array([Boom()], dtype=object))
    with pytest.raises(ValueError, match="not a valid npz memory file"):
        filled_memory().load(str(path))


def snapshot(memory):
    return (
        len(memory),
        memory.filled,
        memory.memory_index,
        memory.env_index,
        {name: t.clone() for name, t in memory.tensors.items()},
    )


def unchanged(memory, before):
    after = snapshot(memory)
    assert after[:4] == before[:4]
    for name, tensor in before[4].items():
        assert torch.equal(tensor.nan_to_num(), after[4][name].nan_to_num())


@pytest.mark.parametrize("format", FORMATS)
@settings(max_examples=15)
@given(cut=st.floats(0.0, 0.98), flip=st.integers(0, 10_000))
def test_truncated_or_corrupted_files_raise_and_leave_the_memory_as_it_was(tmp_path_factory, format, cut, flip):
    directory = tmp_path_factory.mktemp("files")
    path = filled_memory().save(str(directory), format)
    data = bytearray(open(path, "rb").read())
    broken = directory / ("broken." + path.rsplit(".", 1)[1])
    broken.write_bytes(bytes(data[: int(len(data) * cut)]))
    target = filled_memory(steps=2)
    before = snapshot(target)
    with pytest.raises(ValueError, match="path"):
        target.load(str(broken))
    unchanged(target, before)
    # a flipped byte either still loads a valid memory or raises; never a half-loaded one
    data[flip % len(data)] ^= 0xFF
    broken.write_bytes(bytes(data))
    try:
        target.load(str(broken))
    except ValueError:
        unchanged(target, before)


@pytest.mark.parametrize("format", FORMATS)
def test_a_file_of_another_shape_is_refused_and_nothing_changes(tmp_path, format):
    path = filled_memory().save(str(tmp_path), format)
    other = RandomMemory(4, 2, device="cpu")
    with pytest.raises(ValueError, match="memory_size=3"):
        other.load(path)
    different = RandomMemory(3, 2, device="cpu")
    different.create_tensor("obs", 4)
    before = snapshot(different)
    with pytest.raises(ValueError, match="do not match"):
        different.load(path)
    unchanged(different, before)


def test_unknown_extensions_and_formats_are_refused(tmp_path):
    memory = filled_memory()
    with pytest.raises(ValueError, match="format"):
        memory.save(str(tmp_path), "json")
    with pytest.raises(ValueError, match="path"):
        memory.load(str(tmp_path / "memory.json"))
    with pytest.raises(FileNotFoundError):
        memory.load(str(tmp_path / "missing.pt"))
    with pytest.raises(ValueError, match="export_format"):
        RandomMemory(2, export_format="hdf5")


def test_csv_has_a_header_and_one_line_per_written_cell(tmp_path):
    memory = filled_memory(steps=2)
    lines = open(memory.save(str(tmp_path), "csv")).read().splitlines()
    assert lines[0].startswith("# kernelgym-memory ")
    assert lines[1].split(",")[:3] == ["actions.0", "half.0", "obs.0"]
    assert len(lines) == 2 + len(memory)
