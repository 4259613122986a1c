"""Each skrl memory defect named in ARCHITECTURE.md, fixed, plus the seed's add_samples cases."""

import warnings

import pytest
import torch

from kernelgym.memory import Memory, RandomMemory


def make(memory_size=4, num_envs=3, cls=RandomMemory, **kwargs):
    memory = cls(memory_size, num_envs, device="cpu", seed=0, **kwargs)
    memory.create_tensor("obs", 2)
    memory.create_tensor("actions", 1, torch.int64)
    memory.create_tensor("rewards", 1)
    return memory


def full_batch(step, num_envs=3):
    return dict(
        obs=torch.full((num_envs, 2), float(step)),
        actions=torch.full((num_envs, 1), step, dtype=torch.int64),
        rewards=torch.full((num_envs,), float(step)),
    )


def test_index_advances_once_per_call_not_once_per_tensor():
    memory = make()
    memory.add_samples(**full_batch(0))
    assert (memory.memory_index, memory.env_index, len(memory)) == (1, 0, 3)
    memory.add_samples(obs=torch.zeros(2, 2), actions=torch.zeros(2, 1, dtype=torch.int64), rewards=torch.zeros(2))
    assert (memory.memory_index, memory.env_index, len(memory)) == (1, 2, 5)


def test_three_seed_cases_one_env_fewer_envs_all_envs():
    memory = make()
    memory.add_samples(obs=torch.tensor([1.0, 1.5]), actions=torch.tensor([7]), rewards=torch.tensor([0.5]))
    assert (memory.memory_index, memory.env_index) == (0, 1)
    memory.add_samples(obs=torch.ones(2, 2) * 2, actions=torch.full((2, 1), 8), rewards=torch.ones(2))
    assert (memory.memory_index, memory.env_index) == (1, 0)
    memory.add_samples(**full_batch(3))
    assert (memory.memory_index, memory.env_index) == (2, 0)
    obs = memory.get_tensor_by_name("obs")
    assert obs[0, 0].tolist() == [1.0, 1.5] and obs[0, 1:].eq(2).all() and obs[1].eq(3).all()


def test_filled_is_set_on_wrap_around_and_stays_set():
    memory = make()
    for step in range(4):
        assert not memory.filled
        memory.add_samples(**full_batch(step))
    assert memory.filled and memory.memory_index == 0 and len(memory) == 12
    memory.add_samples(**full_batch(4))
    assert memory.filled and memory.memory_index == 1 and len(memory) == 12


def test_partial_add_past_the_end_of_a_row_continues_on_the_next_row():
    memory = make()
    memory.add_samples(obs=torch.zeros(2, 2), actions=torch.zeros(2, 1, dtype=torch.int64), rewards=torch.zeros(2))
    memory.add_samples(obs=torch.ones(2, 2), actions=torch.ones(2, 1, dtype=torch.int64), rewards=torch.ones(2))
    assert (memory.memory_index, memory.env_index) == (1, 1)
    obs = memory.get_tensor_by_name("obs")
    assert obs[0, 2].eq(1).all() and obs[1, 0].eq(1).all() and obs[1, 1].isnan().all()


def test_partial_add_past_the_end_of_the_memory_wraps_to_the_start():
    memory = make(memory_size=2, num_envs=2)

    def batch(n, v):
        return dict(obs=torch.full((n, 2), v), actions=torch.full((n, 1), int(v)), rewards=torch.full((n,), v))

    memory.add_samples(**batch(3, 1.0))
    memory.add_samples(**batch(2, 2.0))
    assert memory.filled and (memory.memory_index, memory.env_index) == (0, 1)
    assert memory.get_tensor_by_name("obs", keepdim=False)[:, 0].tolist() == [2.0, 1.0, 1.0, 2.0]


def test_sample_all_keeps_the_remainder_of_mini_batches():
    memory = make(memory_size=5, num_envs=2)
    for step in range(5):
        memory.add_samples(**full_batch(step, 2))
    batches = memory.sample_all(["obs", "actions"], mini_batches=3)
    assert [len(batch[0]) for batch in batches] == [4, 3, 3]
    assert torch.cat([batch[1] for batch in batches]).view(-1).tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]


def test_sample_by_index_keeps_the_remainder_of_mini_batches():
    memory = make()
    for step in range(4):
        memory.add_samples(**full_batch(step))
    batches = memory.sample_by_index(["actions"], torch.arange(11), mini_batches=4)
    assert [len(batch[0]) for batch in batches] == [3, 3, 3, 2]


@pytest.mark.parametrize("replacement", [True, False])
def test_no_unwritten_row_is_returned_from_a_partly_filled_memory(replacement):
    memory = make(memory_size=50, num_envs=4, replacement=replacement)
    memory.add_samples(**full_batch(1, 4))
    memory.add_samples(obs=torch.ones(3, 2), actions=torch.ones(3, 1, dtype=torch.int64), rewards=torch.ones(3))
    for _ in range(20):
        ((obs, rewards),) = memory.sample(["obs", "rewards"], 7)
        assert not obs.isnan().any() and not rewards.isnan().any()
        assert int(memory.get_sampling_indexes().max()) < 7
    (obs,) = memory.sample_all(["obs"])[0]
    assert obs.shape == (7, 2) and not obs.isnan().any()


def test_sample_all_returns_rows_oldest_first_after_wrap_around():
    memory = make(memory_size=3, num_envs=2)
    for step in range(4):
        memory.add_samples(**full_batch(step, 2))
    (actions,) = memory.sample_all(["actions"])[0]
    assert actions.view(-1).tolist() == [1, 1, 2, 2, 3, 3]


def test_unknown_names_in_add_samples_are_skipped_with_one_warning():
    memory = make()
    with pytest.warns(UserWarning, match="no tensor 'values'"):
        memory.add_samples(**full_batch(0), values=torch.zeros(3, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        memory.add_samples(**full_batch(1), values=torch.zeros(3, 1))
    assert len(memory) == 6


def test_base_memory_does_not_sample_but_samples_all():
    memory = make(cls=Memory)
    memory.add_samples(**full_batch(0))
    with pytest.raises(NotImplementedError):
        memory.sample(["obs"], 2)
    assert memory.sample_all(["obs"])[0][0].shape == (3, 2)


def test_create_tensor_shapes_names_and_recreation():
    memory = RandomMemory(4, 2, device="cpu")
    assert memory.create_tensor("images", (3, 4, 5))
    assert memory.get_tensor_by_name("images").shape == (4, 2, 60)
    assert memory.create_tensor("frames", (3, 4), keep_dimensions=True)
    assert memory.get_tensor_by_name("frames", keepdim=False).shape == (8, 3, 4)
    assert memory.create_tensor("images", 60) is False
    with pytest.raises(ValueError, match="images"):
        memory.create_tensor("images", 61)
    with pytest.raises(ValueError, match="images"):
        memory.create_tensor("images", 60, torch.float64)
    assert memory.get_tensor_names() == ("frames", "images")
    assert memory.get_tensor_by_name("images").dtype == torch.get_default_dtype()
    assert memory.get_tensor_by_name("images").isnan().all()


def test_set_tensor_by_name_writes_in_place_with_either_shape():
    memory = make()
    storage = memory.get_tensor_by_name("rewards")
    memory.set_tensor_by_name("rewards", torch.ones(4, 3, 1))
    memory.set_tensor_by_name("obs", torch.arange(24.0).view(12, 2))
    assert memory.get_tensor_by_name("rewards") is storage and storage.eq(1).all()
    assert memory.get_tensor_by_name("obs")[1, 0].tolist() == [6.0, 7.0]


def test_reset_keeps_storage_but_forgets_the_samples():
    memory = make()
    for step in range(5):
        memory.add_samples(**full_batch(step))
    storage = memory.get_tensor_by_name("obs")
    memory.reset()
    assert (len(memory), memory.filled, memory.memory_index, memory.env_index) == (0, False, 0, 0)
    assert memory.get_tensor_by_name("obs") is storage
    with pytest.raises(ValueError, match="empty"):
        memory.sample(["obs"], 1)


@pytest.mark.parametrize("format, extension", [("pt", "pt"), ("np", "npz"), ("npz", "npz"), ("csv", "csv")])
def test_export_on_fill_writes_a_loadable_file_each_time_the_memory_fills(tmp_path, format, extension):
    memory = make(memory_size=2, export=True, export_format=format, export_directory=str(tmp_path))
    for step in range(2):
        memory.add_samples(**full_batch(step))
    exported = sorted((tmp_path / "memories").iterdir())
    assert len(exported) == 1 and exported[0].suffix == "." + extension
    copy = make(memory_size=2)
    copy.load(str(exported[0]))
    assert copy.filled and torch.equal(copy.get_tensor_by_name("actions"), memory.get_tensor_by_name("actions"))
    for step in range(2, 4):
        memory.add_samples(**full_batch(step))
    assert len(list((tmp_path / "memories").iterdir())) == 2


def test_export_happens_before_a_wrapping_add_overwrites_the_oldest_rows(tmp_path):
    memory = RandomMemory(2, 1, device="cpu", export=True, export_directory=str(tmp_path))
    memory.create_tensor("x", 1, torch.int64)
    memory.add_samples(x=torch.tensor([1]))
    memory.add_samples(x=torch.tensor([2, 3]))  # 2 fills the memory, 3 wraps onto 1
    copy = RandomMemory(2, 1, device="cpu")
    copy.load(str(next((tmp_path / "memories").iterdir())))
    assert copy.get_tensor_by_name("x").view(-1).tolist() == [1, 2]
    assert memory.get_tensor_by_name("x").view(-1).tolist() == [3, 2]


def test_share_memory_moves_cpu_tensors_to_shared_memory_and_keeps_views():
    memory = make()
    view = memory.get_tensor_by_name("obs", keepdim=False)
    memory.share_memory()
    assert all(tensor.is_shared() for tensor in memory.tensors.values())
    memory.add_samples(**full_batch(5))
    assert view[0].eq(5).all()


def test_share_memory_after_handing_out_arrays_is_refused():
    memory = make()
    memory.get_array_by_name("obs")
    with pytest.raises(RuntimeError, match="before get_array_by_name"):
        memory.share_memory()


def test_seeded_memories_sample_the_same_indexes():
    first, second = make(), make()
    for memory in (first, second):
        for step in range(4):
            memory.add_samples(**full_batch(step))
        memory.sample(["obs"], 16)
    assert torch.equal(first.get_sampling_indexes(), second.get_sampling_indexes())
    generator = torch.Generator().manual_seed(3)
    third = RandomMemory(4, 3, device="cpu", seed=generator)
    assert third.generator is generator


def test_memories_too_long_for_the_row_view_cache_write_the_same(monkeypatch):
    from kernelgym.memory import storage

    results = []
    for cache_rows in (0, 100):
        monkeypatch.setattr(storage, "_ROW_VIEW_CACHE_ROWS", cache_rows)
        memory = make(memory_size=3)
        assert bool(memory._row_views) == (cache_rows > 0)
        for step in range(5):
            memory.add_samples(**full_batch(step))
        memory.add_samples(obs=torch.ones(2, 2), actions=torch.ones(2, 1, dtype=torch.int64), rewards=torch.ones(2))
        results.append([t.nan_to_num(-1.0) for t in memory.sample_all(["obs", "actions", "rewards"])[0]])
    assert all(torch.equal(a, b) for a, b in zip(*results))


def test_stored_samples_are_detached_from_autograd():
    memory = make()
    rewards = torch.ones(3, requires_grad=True)
    memory.add_samples(**{**full_batch(0), "rewards": rewards * 2})
    memory.set_tensor_by_name("obs", torch.zeros(4, 3, 2, requires_grad=True))
    assert not any(tensor.requires_grad for tensor in memory.tensors.values())
    assert memory.get_tensor_by_name("rewards")[0].view(-1).tolist() == [2.0, 2.0, 2.0]
