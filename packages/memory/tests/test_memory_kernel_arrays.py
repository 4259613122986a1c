"""Storage that kernels write directly: arrays aliasing the torch storage, attached tensors, data managers."""

import numpy as np
import pytest
import torch

from kernelgym.memory import Memory, RandomMemory


def test_get_array_by_name_aliases_the_storage_both_ways():
    memory = RandomMemory(4, 3, device="cpu")
    memory.create_tensor("obs", (2,), keep_dimensions=True)
    array = memory.get_array_by_name("obs")
    flat = memory.get_array_by_name("obs", keepdim=False)
    assert isinstance(array, np.ndarray) and array.shape == (4, 3, 2) and flat.shape == (12, 2)
    assert np.shares_memory(array, flat)
    assert array.ctypes.data == memory.get_tensor_by_name("obs").data_ptr()
    array[0, :, :] = 7.0  # a "kernel" writes one row in place...
    memory.advance(3)  # ...and tells the memory
    ((obs,),) = memory.sample_all(["obs"])
    assert obs.eq(7.0).all() and len(memory) == 3
    memory.add_samples(obs=torch.full((3, 2), 5.0))
    assert (array[1] == 5.0).all()


def test_arrays_round_trip_through_dlpack_without_a_copy():
    memory = RandomMemory(4, 2, device="cpu")
    memory.create_tensor("x", 1, torch.int64)
    array = memory.get_array_by_name("x")
    through_dlpack = np.from_dlpack(memory.get_tensor_by_name("x"))
    back = torch.from_dlpack(array)
    assert np.shares_memory(array, through_dlpack)
    assert back.data_ptr() == memory.get_tensor_by_name("x").data_ptr()
    back[2, 1, 0] = 42
    assert array[2, 1, 0] == 42


def test_arrays_stay_valid_after_load_and_reset(tmp_path):
    memory = RandomMemory(2, 2, device="cpu")
    memory.create_tensor("x", 1, torch.int64)
    array = memory.get_array_by_name("x")
    memory.add_samples(x=torch.tensor([1, 2]))
    path = memory.save(str(tmp_path))
    memory.add_samples(x=torch.tensor([3, 4]))
    memory.load(path)
    memory.reset()
    memory.add_samples(x=torch.tensor([[8], [9]]))
    assert array[0].ravel().tolist() == [8, 9]


def test_attach_tensor_shares_a_foreign_buffer():
    buffer = np.zeros((5, 2, 3), dtype=np.float32)
    memory = RandomMemory(5, 2, device="cpu", seed=0)
    memory.attach_tensor("obs", torch.from_numpy(buffer))
    buffer[0] = 1.0
    buffer[1, 0] = 2.0
    memory.advance(3)
    ((obs,),) = memory.sample_all(["obs"])
    assert obs[:, 0].tolist() == [1.0, 1.0, 2.0]
    memory.add_samples(obs=torch.full((1, 3), 3.0))
    assert (buffer[1, 1] == 3.0).all()


class FakeDataManager:
    """The part of kernelgym-core's CUDADataManager that from_data_manager uses."""

    def __init__(self, **arrays):
        self.arrays = arrays
        self.tensors = {name: torch.from_numpy(array) for name, array in arrays.items()}

    def is_data_on_device_via_torch(self, name):
        return name in self.tensors

    def data_on_device_via_torch(self, name):
        return self.tensors[name]


def test_from_data_manager_wraps_the_managers_arrays_without_copies():
    obs = np.zeros((6, 4, 2), dtype=np.float32)
    done = np.zeros((6, 4), dtype=np.bool_)
    manager = FakeDataManager(obs=obs, terminated=done)
    memory = RandomMemory.from_data_manager(manager, ["obs", "terminated"], 6, seed=0)
    assert (memory.memory_size, memory.num_envs, memory.device.type) == (6, 4, "cpu")
    assert memory.get_tensor_by_name("terminated").shape == (6, 4, 1)
    for step in range(3):  # a "kernel" writing rows into the manager's arrays
        obs[memory.memory_index] = step
        done[memory.memory_index, 0] = step == 1
        memory.advance(memory.num_envs)
    ((values, mask),) = memory.sample(["obs"], 20, sequence_length=3, return_mask=True)
    assert len(memory) == 12 and values.shape == (60, 2)
    for row, ok in zip(values[:, 0].view(20, 3).tolist(), mask.view(20, 3).tolist()):
        assert row[0] + sum(ok) - 1 == row[sum(ok) - 1]


def test_from_data_manager_checks_its_arguments():
    manager = FakeDataManager(obs=np.zeros((6, 4, 2), dtype=np.float32), flat=np.zeros(6, dtype=np.float32))
    with pytest.raises(TypeError, match="names"):
        Memory.from_data_manager(manager, "obs", 6)
    with pytest.raises(ValueError, match="memory_size=5"):
        Memory.from_data_manager(manager, ["obs"], 5)
    with pytest.raises(ValueError, match="flat"):
        Memory.from_data_manager(manager, ["flat"], 6)


def test_a_kernelgym_core_kernel_writes_rows_of_a_memory_shared_with_its_data_manager():
    core = pytest.importorskip("kernelgym.core", reason="kernelgym-core is not installed")
    num_envs, memory_size = 4, 5
    manager = core.CUDADataManager(num_envs=num_envs, backend="cpu")
    feed = core.DataFeed()
    feed.add_data(name="history", data=np.zeros((memory_size, num_envs, 2), dtype=np.float32))
    manager.push_data_to_device(feed, torch_accessible=True)
    memory = RandomMemory.from_data_manager(manager, ["history"], memory_size, seed=0)
    with pytest.raises(RuntimeError, match="'history' is attached storage"):
        memory.share_memory()  # would move the storage away from the kernel's array (issue 25)
    memory.create_tensor("own", 1)  # a tensor of the memory itself, written through its array
    own = memory.get_array_by_name("own")

    @core.env_kernel
    def record(env, history, own, row, step):
        history[row, env, 0] = step
        history[row, env, 1] = env
        own[row, env, 0] = 10.0 * step + env

    for step in range(7):
        record.launch("cpu", num_envs, manager.device_data("history"), own, memory.memory_index, float(step))
        memory.advance(num_envs)
    history, own_values = memory.sample_all(["history", "own"])[0]
    assert memory.filled and history[:, 0].tolist() == [s for s in range(2, 7) for _ in range(num_envs)]
    assert own_values.view(-1).tolist() == [10.0 * s + e for s in range(2, 7) for e in range(num_envs)]
    assert manager.data_on_device_via_torch("history").data_ptr() == memory.get_tensor_by_name("history").data_ptr()


def _write_from_child(memory):
    memory.set_tensor_by_name("x", torch.full((3, 2, 1), 7, dtype=torch.int64))


def test_shared_memory_is_seen_by_another_process():
    import multiprocessing

    memory = RandomMemory(3, 2, device="cpu")
    memory.create_tensor("x", 1, torch.int64)
    memory.share_memory()
    array = memory.get_array_by_name("x")  # handed out after sharing: stays valid
    child = multiprocessing.get_context("fork").Process(target=_write_from_child, args=(memory,))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    assert (array == 7).all()


@pytest.mark.gpu
def test_cuda_memories_hand_out_numba_device_arrays_of_their_storage():
    memory = RandomMemory(4, 2, device="cuda")
    memory.create_tensor("x", 1, torch.int64)
    array = memory.get_array_by_name("x")
    assert array.__cuda_array_interface__["data"][0] == memory.get_tensor_by_name("x").data_ptr()
    torch.as_tensor(array, device="cuda").fill_(3)
    memory.advance(2)
    assert memory.sample_all(["x"])[0][0].view(-1).tolist() == [3, 3]


def test_share_memory_refuses_attached_numpy_storage_and_writes_stay_visible():
    buffer = np.zeros((3, 2, 1), dtype=np.float32)
    memory = RandomMemory(3, 2, device="cpu", seed=0)
    memory.create_tensor("own", 1)
    memory.attach_tensor("obs", torch.from_numpy(buffer))
    with pytest.raises(RuntimeError, match=r"share_memory: tensor 'obs' is attached storage"):
        memory.share_memory()
    assert not memory.get_tensor_by_name("own").is_shared()  # refused before anything moved
    buffer[0] = 5.0  # the owner's writes still reach the memory
    memory.advance(2)
    ((obs,),) = memory.sample_all(["obs"])
    assert obs.view(-1).tolist() == [5.0, 5.0]


def test_share_memory_refuses_data_manager_arrays_and_kernel_writes_stay_visible():
    history = np.zeros((4, 2, 1), dtype=np.float32)
    memory = RandomMemory.from_data_manager(FakeDataManager(history=history), ["history"], 4, seed=0)
    with pytest.raises(RuntimeError, match="'history'.*from_data_manager"):
        memory.share_memory()
    history[0, :, 0] = [1.0, 2.0]  # what a kernel launched with the manager's array writes
    memory.advance(2)
    assert memory.sample_all(["history"])[0][0].view(-1).tolist() == [1.0, 2.0]


def test_attached_storage_that_is_shared_already_is_kept_by_share_memory():
    tensor = torch.zeros(3, 2, 1).share_memory_()
    array = tensor.numpy()
    memory = RandomMemory(3, 2, device="cpu", seed=0)
    memory.attach_tensor("obs", tensor)
    memory.share_memory()
    array[0] = 4.0
    memory.advance(2)
    assert memory.sample_all(["obs"])[0][0].view(-1).tolist() == [4.0, 4.0]
