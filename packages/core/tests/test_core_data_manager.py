"""CUDADataManager on the cpu backend: round trips, in-place resets, logs and bad input."""

import sysconfig

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from core_test_kernels import seed_example_kernel, tick
from kernelgym.core import CUDADataManager, DataFeed, codegen

ALL_DTYPES = [
    np.bool_,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.float32,
    np.float64,
    np.complex64,
    np.complex128,
]
DTYPES = st.sampled_from(ALL_DTYPES)


def same_bits(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def run_seed_example(backend):
    """WarpDrive's CUDADataManager docstring example, as written (a backend chosen,
    ``data1`` pushed, and the CUDA C function replaced by a write-once kernel)."""
    cuda_data_manager = CUDADataManager(num_agents=10, num_envs=5, episode_length=100, backend=backend)

    data1 = DataFeed()
    data1.add_data(name="X", data=np.array([[1, 2, 3, 4, 5], [0, 0, 0, 0, 0], [0, 0, 0, 0, 0]]))
    data1.add_data(name="a", data=100)
    cuda_data_manager.push_data_to_device(data1)

    data2 = DataFeed()
    data2.add_data(name="Y", data=[[0.1, 0.2, 0.3, 0.4, 0.5], [0.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0]])
    cuda_data_manager.push_data_to_device(data2, torch_accessible=True)

    X_copy_at_host = cuda_data_manager.pull_data_from_device(name="X")
    Y_copy_at_host = cuda_data_manager.pull_data_from_device(name="Y")

    Y_tensor_accessible_by_torch = None
    if cuda_data_manager.is_data_on_device_via_torch("Y"):
        Y_tensor_accessible_by_torch = cuda_data_manager.data_on_device_via_torch("Y")

    seed_example_kernel.launch(backend, 3, cuda_data_manager.device_data("X"), cuda_data_manager.device_data("Y"))
    return cuda_data_manager, X_copy_at_host, Y_copy_at_host, Y_tensor_accessible_by_torch


def check_seed_example(backend):
    dm, x, y, y_tensor = run_seed_example(backend)
    assert x.dtype == np.int64 and y.dtype == np.float64  # no silent 32-bit casts
    np.testing.assert_array_equal(x, [[1, 2, 3, 4, 5], [0] * 5, [0] * 5])
    assert dm.pull_data_from_device("a") == 100 and dm.scalar_data_list == ["a"]
    assert not dm.is_data_on_device_via_torch("X") and dm.is_data_on_device("X")
    want = y + x
    np.testing.assert_array_equal(dm.pull_data_from_device("Y"), want)
    # the torch tensor taken before the launch sees the kernel's writes
    np.testing.assert_array_equal(y_tensor.cpu().numpy(), want)
    assert dm.meta_info("episode_length") == 100 and dm.meta_info("n_agents") == 10


def test_the_seed_example_runs_on_cpu():
    check_seed_example("cpu")


@pytest.mark.sim
def test_the_seed_example_runs_on_sim():
    check_seed_example("sim")


@settings(max_examples=40)
@given(
    DTYPES.flatmap(lambda dtype: hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=5, min_side=0, max_side=4)))
)
def test_push_pull_round_trip_keeps_values_dtype_and_shape(values):
    dm = CUDADataManager(backend="cpu")
    feed = DataFeed()
    feed.add_data("v", values)
    dm.push_data_to_device(feed)
    assert dm.get_dtype("v") == values.dtype
    assert dm.get_shape("v") == values.shape
    assert same_bits(dm.pull_data_from_device("v"), values)
    assert dm.scalar_data_list == (["v"] if values.ndim == 0 else [])
    # the host copy is independent of the caller's array and read-only
    assert not dm.host_data["v"].flags.writeable


@pytest.mark.sim
@settings(max_examples=15)
@given(
    DTYPES.flatmap(lambda dtype: hnp.arrays(dtype, hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=4)))
)
def test_push_pull_round_trip_on_sim(values):
    dm = CUDADataManager(backend="sim")
    feed = DataFeed()
    feed.add_data("v", values)
    dm.push_data_to_device(feed)
    assert not isinstance(dm.device_data("v"), np.ndarray)
    assert dm.get_dtype("v") == values.dtype and dm.get_shape("v") == values.shape
    assert same_bits(dm.pull_data_from_device("v"), values)


@st.composite
def reset_cases(draw):
    num_envs = draw(st.integers(1, 6))
    arrays = draw(
        st.lists(
            st.tuples(DTYPES, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3)),
            min_size=0,
            max_size=3,
        )
    )
    initial = [draw(hnp.arrays(dtype, (num_envs, *rest))) for dtype, rest in arrays]
    changed = [draw(hnp.arrays(values.dtype, values.shape)) for values in initial]
    done = draw(hnp.arrays(np.int32, num_envs, elements=st.integers(0, 1)))
    timestep = draw(hnp.arrays(np.int32, num_envs, elements=st.integers(0, 100)))
    return num_envs, initial, changed, done, timestep


def check_reset_done_envs(backend, case):
    num_envs, initial, changed, done, timestep = case
    dm = CUDADataManager(num_envs=num_envs, backend=backend)
    feed = DataFeed()
    for index, values in enumerate(initial):
        feed.add_data(f"x{index}", values, save_copy_and_apply_at_reset=True)
    feed.add_data("untouched", np.arange(num_envs, dtype=np.float64))
    dm.push_data_to_device(feed, torch_accessible=True)
    views = {name: dm.data_on_device_via_torch(name) for name in dm.reset_data_list}
    pointers = {name: view.data_ptr() for name, view in views.items()}
    for index, values in enumerate(changed):
        views[f"x{index}"].copy_(torch.from_numpy(values.copy()))
    dm.data_on_device_via_torch("_done_").copy_(torch.from_numpy(done))
    dm.data_on_device_via_torch("_timestep_").copy_(torch.from_numpy(timestep))

    dm.reset_done_envs()

    is_done = done.astype(bool)
    for index, (start, values) in enumerate(zip(initial, changed)):
        want = values.copy()
        want[is_done] = start[is_done]
        got = dm.pull_data_from_device(f"x{index}")
        assert same_bits(got, want), f"x{index}"
        assert views[f"x{index}"].data_ptr() == pointers[f"x{index}"]
        assert same_bits(views[f"x{index}"].cpu().numpy(), want)
    np.testing.assert_array_equal(dm.pull_data_from_device("_done_"), np.zeros(num_envs))
    np.testing.assert_array_equal(dm.pull_data_from_device("_timestep_"), np.where(is_done, 0, timestep))
    np.testing.assert_array_equal(dm.pull_data_from_device("untouched"), np.arange(num_envs))


@settings(max_examples=40)
@given(reset_cases())
def test_reset_done_envs_restores_exactly_the_done_envs(case):
    check_reset_done_envs("cpu", case)


@pytest.mark.sim
@settings(max_examples=8)
@given(reset_cases())
def test_reset_done_envs_restores_exactly_the_done_envs_on_sim(case):
    check_reset_done_envs("sim", case)


def check_reset_device_in_place(backend):
    dm = CUDADataManager(num_envs=3, backend=backend)
    feed = DataFeed()
    feed.add_data("x", np.arange(6, dtype=np.float64).reshape(3, 2))
    feed.add_data("n", np.arange(3, dtype=np.int64))
    dm.push_data_to_device(feed, torch_accessible=True)
    array = dm.device_data("x")
    tensor = dm.data_on_device_via_torch("x")
    pointer = tensor.data_ptr()
    tensor += 10.0  # torch -> device array
    assert dm.pull_data_from_device("x")[0, 0] == 10.0
    dm.reset_device("x")
    assert dm.device_data("x") is array and dm.data_on_device_via_torch("x") is tensor
    assert tensor.data_ptr() == pointer
    np.testing.assert_array_equal(tensor.cpu().numpy(), np.arange(6.0).reshape(3, 2))
    tick.launch(backend, 3, dm.device_data("_timestep_"))  # a kernel -> the torch view
    assert dm.data_on_device_via_torch("_timestep_").tolist() == [1, 1, 1]
    dm.data_on_device_via_torch("n").fill_(7)
    dm.reset_device()
    assert dm.pull_data_from_device("n").tolist() == [0, 1, 2]
    assert dm.data_on_device_via_torch("_timestep_").tolist() == [0, 0, 0]


def test_reset_device_is_in_place_and_torch_views_survive():
    check_reset_device_in_place("cpu")


@pytest.mark.sim
def test_reset_device_is_in_place_and_torch_views_survive_on_sim():
    check_reset_device_in_place("sim")


def check_log_step(backend):
    dm = CUDADataManager(num_envs=2, episode_length=3, backend=backend)
    feed = DataFeed()
    feed.add_data("pos", np.array([[1, 2], [3, 4]], np.int16), log_data_across_episode=True)
    dm.push_data_to_device(feed, torch_accessible=True)
    assert dm.log_data_list == ["pos"] and dm.get_shape("pos_for_log") == (4, 2, 2)
    pos = dm.data_on_device_via_torch("pos")
    timestep = dm.data_on_device_via_torch("_timestep_")
    timestep.copy_(torch.tensor([0, 2], dtype=torch.int32))
    dm.log_step()
    pos += 10
    timestep.copy_(torch.tensor([1, 7], dtype=torch.int32))  # 7 > episode_length: not logged
    dm.log_step()
    log = dm.pull_data_from_device("pos_for_log")
    assert log.dtype == np.int16
    np.testing.assert_array_equal(log[:, 0], [[1, 2], [11, 12], [0, 0], [0, 0]])
    np.testing.assert_array_equal(log[:, 1], [[0, 0], [0, 0], [3, 4], [0, 0]])


def test_log_step_writes_the_row_of_each_envs_timestep():
    check_log_step("cpu")


@pytest.mark.sim
def test_log_step_on_sim():
    check_log_step("sim")


class DataManagerMachine(RuleBasedStateMachine):
    """Writes, steps, dones, resets and logs against a numpy model of every array."""

    num_envs, episode_length = 4, 3

    def __init__(self):
        super().__init__()
        self.dm = CUDADataManager(
            num_agents=2, num_envs=self.num_envs, episode_length=self.episode_length, backend="cpu"
        )
        feed = DataFeed()
        feed.add_data("a", np.linspace(0, 1, 24).reshape(4, 2, 3), True, True, layout="per_agent")
        feed.add_data("b", np.arange(4, dtype=np.int64) - 2, save_copy_and_apply_at_reset=True)
        feed.add_data("c", np.ones((4, 5), np.float32))
        self.dm.push_data_to_device(feed, torch_accessible=True)
        self.initial = {name: np.array(values) for name, values in self.dm.host_data.items()}
        self.model = {name: values.copy() for name, values in self.initial.items()}
        self.tensors = {name: self.dm.data_on_device_via_torch(name) for name in self.model}
        self.pointers = {name: tensor.data_ptr() for name, tensor in self.tensors.items()}

    @rule(name=st.sampled_from(["a", "b", "c"]), env=st.integers(0, 3), value=st.integers(-5, 5))
    def write_row(self, name, env, value):
        self.dm.device_data(name)[env] = value
        self.model[name][env] = value

    @rule()
    def step(self):
        tick.launch("cpu", self.num_envs, self.dm.device_data("_timestep_"))
        self.model["_timestep_"] += 1

    @rule(env=st.integers(0, 3))
    def mark_done(self, env):
        self.tensors["_done_"][env] = 1
        self.model["_done_"][env] = 1

    @rule()
    def reset_done_envs(self):
        self.dm.reset_done_envs()
        done = self.model["_done_"].astype(bool)
        for name in ("a", "b"):
            self.model[name][done] = self.initial[name][done]
        self.model["_timestep_"][done] = 0
        self.model["_done_"][:] = 0

    @rule(name=st.sampled_from([None, "a", "c", "_done_", "a_for_log"]))
    def reset_device(self, name):
        self.dm.reset_device(name)
        for reset in [name] if name else list(self.model):
            self.model[reset][...] = self.initial[reset]

    @rule()
    def log_step(self):
        self.dm.log_step()
        for env, t in enumerate(self.model["_timestep_"]):
            if 0 <= t <= self.episode_length:
                self.model["a_for_log"][t, env] = self.model["a"][env]

    @invariant()
    def device_matches_model_and_views_stay(self):
        for name, want in self.model.items():
            assert same_bits(self.dm.pull_data_from_device(name), want), name
            assert self.tensors[name].data_ptr() == self.pointers[name], name
            assert same_bits(self.tensors[name].numpy(), want), name


TestDataManagerMachine = DataManagerMachine.TestCase
TestDataManagerMachine.settings = settings(max_examples=25, stateful_step_count=20)


# -- bad input --------------------------------------------------------------------------


def feed_of(**entries):
    feed = DataFeed()
    for name, (data, attributes) in entries.items():
        feed.add_data(name, data, **attributes)
    return feed


@pytest.mark.parametrize(
    "entries, error, message",
    [
        (
            {"obj": (np.array([1, "a"], dtype=object), {})},
            TypeError,
            "obj: expected numeric or bool data, got dtype object",
        ),
        ({"rag": ([[1, 2], [3]], {})}, ValueError, "rag: cannot make an array"),
        ({"txt": (np.array(["a", "b"]), {})}, TypeError, "txt: expected numeric or bool data, got dtype <U1"),
        ({"gen": ((i for i in range(3)), {})}, TypeError, "gen: expected numeric or bool data, got dtype object"),
        ({"odd_type": ({1, 2}, {})}, TypeError, "odd_type: expected numeric or bool data"),
        (
            {"short": (np.zeros((3, 2)), {"save_copy_and_apply_at_reset": True})},
            ValueError,
            r"short: save_copy_and_apply_at_reset needs the leading dim to be num_envs=4, got shape \(3, 2\)",
        ),
        (
            {"scal": (5.0, {"log_data_across_episode": True})},
            ValueError,
            "scal: log_data_across_episode needs the leading dim",
        ),
        (
            {"lay": (np.zeros(3), {"layout": "per_env"})},
            ValueError,
            r"lay: layout='per_env' needs the leading dim to be num_envs=4",
        ),
        (
            {"agents": (np.zeros((4, 3)), {"layout": "per_agent"})},
            ValueError,
            r"agents: layout='per_agent' needs the leading dims to be \(num_envs, num_agents\)"
            r"=\(4, 2\), got shape \(4, 3\)",
        ),
        ({"odd": (np.zeros(4), {"layout": "diagonal"})}, ValueError, "odd: layout must be one of"),
        ({"_done_": (np.zeros(4), {})}, ValueError, "_done_: already used as data on the device"),
        ({"steps": (np.zeros(4), {})}, ValueError, "steps: already used as meta info"),
        ({"table": (np.zeros(4), {})}, ValueError, "table: already used as a shared constant"),
        (
            {"x": (np.zeros(4), {"save_copy_and_apply_at_reset": True}), "x_at_reset": (np.zeros(4), {})},
            ValueError,
            "x_at_reset: already used as data pushed in the same call",
        ),
    ],
)
def test_bad_data_raises_naming_it_and_stores_nothing(entries, error, message):
    dm = CUDADataManager(num_agents=2, num_envs=4, episode_length=5, backend="cpu")
    dm.add_meta_info({"steps": 3})
    dm.add_shared_constants({"table": [[0, 1], [1, 0]]})
    feed = DataFeed()
    feed.add_data("good", np.ones(4))  # pushed in the same call: must not be stored either
    for name, (data, attributes) in entries.items():
        feed.add_data(name, data, **attributes)
    before = dict(dm.host_data)
    with pytest.raises(error, match=message):
        dm.push_data_to_device(feed)
    assert dict(dm.host_data) == before
    assert not dm.is_data_on_device("good")
    assert dm.reset_data_list == [] and dm.log_data_list == [] and dm.scalar_data_list == []


def test_unknown_names_raise_key_errors_naming_them():
    dm = CUDADataManager(num_envs=2, backend="cpu")
    for method in (
        dm.device_data,
        dm.pull_data_from_device,
        dm.get_dtype,
        dm.get_shape,
        dm.reset_device,
        dm.data_on_device_via_torch,
        dm.meta_info,
        dm.shared_constant,
        dm.kernel_argument,
    ):
        with pytest.raises(KeyError, match="'nope'"):
            method("nope")
    assert not dm.is_data_on_device("nope") and not dm.is_data_on_device_via_torch("nope")


def test_other_bad_input():
    dm = CUDADataManager(num_envs=2, episode_length=4, backend="cpu")
    with pytest.raises(ValueError, match="x: already in this DataFeed"):
        feed_of(x=(1, {})).add_data("x", 2)
    with pytest.raises(TypeError, match="data: expected a DataFeed or dict, got list"):
        dm.push_data_to_device([1, 2])
    with pytest.raises(TypeError, match="x: expected {'data'"):
        dm.push_data_to_device({"x": np.zeros(2)})
    with pytest.raises(ValueError, match="s: a scalar is passed to kernels by value and cannot be torch accessible"):
        dm.push_data_to_device(feed_of(s=(3, {})), torch_accessible=True)
    dm.push_data_to_device(feed_of(plain=(np.zeros(2), {})))
    with pytest.raises(ValueError, match="plain: not torch accessible"):
        dm.data_on_device_via_torch("plain")
    with pytest.raises(TypeError, match="speed: meta info must be an int, float or bool scalar, got list"):
        dm.add_meta_info({"speed": [1, 2]})
    dm.add_meta_info({"episode_length": 4})  # the same value again is fine
    with pytest.raises(ValueError, match="episode_length: meta info is already 4, cannot set it to 5"):
        dm.add_meta_info({"episode_length": 5})
    with pytest.raises(ValueError, match="plain: already used as data on the device"):
        dm.add_shared_constants({"plain": 1})
    with pytest.raises(TypeError, match="name: expected a non-empty str"):
        dm.push_data_to_device({3: {"data": 1}})
    with pytest.raises(ValueError, match="num_envs: expected an int >= 1, got 0"):
        CUDADataManager(num_envs=0, backend="cpu")
    with pytest.raises(ValueError, match="reset_done_envs needs the data manager's num_envs"):
        CUDADataManager(backend="cpu").reset_done_envs()
    with pytest.raises(ValueError, match="log_step needs the data manager's episode_length"):
        CUDADataManager(num_envs=2, backend="cpu").log_step()
    with pytest.raises(ValueError, match="big: log_data_across_episode needs the data manager's episode_length"):
        CUDADataManager(num_envs=2, backend="cpu").push_data_to_device(
            feed_of(big=(np.zeros(2), {"log_data_across_episode": True}))
        )


def test_shared_constants_keep_their_dtype_and_are_read_only():
    dm = CUDADataManager(num_envs=2, backend="cpu")
    dm.add_shared_constants({"action_mapping": [[0, 0], [1, 1], [-1, -1]], "gravity": 9.8})
    mapping = dm.shared_constant("action_mapping")
    assert mapping.dtype == np.int64 and mapping.shape == (3, 2)
    assert not mapping.flags.writeable
    assert dm.shared_constant("gravity") == 9.8
    np.testing.assert_array_equal(dm.kernel_argument("action_mapping"), mapping)


def test_launchers_are_generated_outside_site_packages():
    tick.launch("cpu", 1, np.zeros(1, np.int32))
    path = tick._module(1).__file__
    assert path.startswith(str(codegen.cache_dir()))
    for site in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        assert not path.startswith(site)


def check_uniform_data_keeps_one_host_element(backend, dtype, shape, value, monkeypatch):
    from kernelgym.core import arrays

    # a fill block smaller than the data: the device copy takes several blocks
    monkeypatch.setattr(arrays, "_FILL_BLOCK_BYTES", 3 * np.dtype(dtype).itemsize)
    dm = CUDADataManager(num_envs=shape[0], backend=backend)
    feed = DataFeed()
    feed.add_data(
        "x", np.broadcast_to(np.array(value, dtype), shape), layout="per_env", save_copy_and_apply_at_reset=True
    )
    dm.push_data_to_device(feed, torch_accessible=True)
    host = dm.host_data["x"]
    assert host.shape == shape and not any(host.strides), "the host copy of uniform data is one element"
    expected = np.full(shape, value, dtype)
    assert same_bits(dm.pull_data_from_device("x"), expected)
    assert same_bits(dm.pull_data_from_device("x_at_reset"), expected)
    dm.data_on_device_via_torch("x").view(torch.uint8).fill_(1)
    dm.reset_device("x")
    assert same_bits(dm.pull_data_from_device("x"), expected)


UNIFORM_CASES = st.tuples(
    st.sampled_from([np.bool_, np.int32, np.uint64, np.float32, np.float64]),
    hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5),
    st.integers(0, 1),
)


@given(UNIFORM_CASES)
@settings(max_examples=20)
def test_uniform_data_keeps_one_host_element(case):
    with pytest.MonkeyPatch.context() as monkeypatch:
        check_uniform_data_keeps_one_host_element("cpu", *case, monkeypatch)


@pytest.mark.sim
@given(UNIFORM_CASES)
@settings(max_examples=10, deadline=None)
def test_uniform_data_keeps_one_host_element_on_sim(case):
    with pytest.MonkeyPatch.context() as monkeypatch:
        check_uniform_data_keeps_one_host_element("sim", *case, monkeypatch)
