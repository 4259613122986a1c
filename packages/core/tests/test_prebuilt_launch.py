"""The prebuilt cuda launch passes what numba-cuda's own launch passes (kernelgym.core.prebuilt_launch).

No GPU is needed: numba-cuda's ``_Kernel._prepare_args`` (what its launch calls for every
argument) runs on stand-in device arrays that describe host memory, and cuda.core's
``ParamHolder`` (what numba-cuda hands the driver) packs the same list. For every argument
kind a binding can pass (each dtype, ndim 0-3, contiguous and strided, scalars of each width,
records, tuples), the prebuilt buffer must equal, slot by slot, the bytes ``ParamHolder``
packs, and decode to the array's own size, itemsize, pointer, shape and strides. A per-call
array swapped in rewrites exactly its data pointer. Then the host path of a whole CartPole
step, with the driver call replaced by a counter: one driver call per kernel, and no memory
allocated per step.
"""

import ctypes
import logging
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgym.core import prebuilt_launch
from kernelgym.core.prebuilt_launch import PrebuiltLaunch, PrebuiltUnavailable, stand_in_device_array

pytestmark = pytest.mark.skipif(
    __import__("os").environ.get("NUMBA_ENABLE_CUDASIM") == "1",
    reason="the simulator replaces numba-cuda's launch and has no parameter layout",
)

DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
DTYPES += [np.float16, np.float32, np.float64, np.complex64, np.complex128]


def numba_parameters(values):
    """numba-cuda's own parameter list for ``values`` (its launch's ``_prepare_args``)."""
    from numba.cuda.dispatcher import _Kernel
    from numba.cuda.typing.typeof import Purpose, typeof

    shim = type("Kernel", (), {"extensions": (), "_prepare_args": _Kernel._prepare_args})()
    items = []
    for value in values:
        kind = value[0] if isinstance(value, tuple) and isinstance(value[0], str) else None
        numba_type, value = (value[1], value[2]) if kind else (typeof(value, Purpose.argument), value)
        _Kernel._prepare_args(shim, numba_type, value, 0, [], items)
    return items


def holder_bytes(items, sizes):
    """The bytes cuda.core's ParamHolder packs for ``items``, ``sizes[i]`` bytes of parameter i."""
    from cuda.core._kernel_arg_handler import ParamHolder

    holder = ParamHolder(items)
    pointers = (ctypes.c_void_p * len(items)).from_address(holder.ptr)
    return [ctypes.string_at(pointers[i], size) for i, size in enumerate(sizes)]


def record_sizes(items):
    return [ctypes.sizeof(prebuilt_launch._slot_value(item)) for item in items]


def stub_launch():
    calls = []

    def launch_kernel(*arguments):
        calls.append(arguments[-2])
        return (0,)

    return launch_kernel, calls


def prebuilt(items, **kwargs):
    launch_kernel, _ = stub_launch()
    return PrebuiltLaunch(0, 1, 1, items, launch_kernel=launch_kernel, **kwargs)


def slots(launch):
    data = launch.parameters()
    return [data[i : i + 8] for i in range(0, len(data), 8)]


@st.composite
def host_arrays(draw):
    """An array of any kernel dtype, ndim 0-3, C- or F-contiguous or strided (steps, a
    reversed axis, a broadcast axis), at least one element."""
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    ndim = draw(st.integers(0, 3))
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=ndim, max_size=ndim)))
    base = np.arange(int(np.prod(shape, dtype=np.int64)) * 4).astype(dtype).reshape(*shape, 4)[..., 0]
    form = draw(st.sampled_from(["C", "F", "step", "reversed", "broadcast"])) if ndim else "C"
    if form == "F":
        base = np.asfortranarray(base)
    elif form == "step":
        base = np.arange(int(np.prod(shape)) * 3).astype(dtype).reshape(*shape[:-1], shape[-1] * 3)[..., ::3]
    elif form == "reversed":
        base = base[::-1]
    elif form == "broadcast":
        base = np.broadcast_to(base[..., :1], shape)
    return base


@settings(max_examples=60)
@given(array=host_arrays())
def test_an_array_passes_numba_cudas_bytes_and_its_own_metadata(array):
    device = stand_in_device_array(array)
    items = numba_parameters([device])
    launch = prebuilt(items)
    expected = holder_bytes(items, record_sizes(items))
    assert [slot[: len(want)] for slot, want in zip(slots(launch), expected)] == expected
    # meminfo, parent, size, itemsize, data, shape..., strides...: the array's own metadata
    decoded = struct.unpack(f"<{len(items)}q", launch.parameters())
    assert decoded == (0, 0, array.size, array.itemsize, array.ctypes.data, *array.shape, *array.strides)


SCALARS = [
    ("int8", -(2**7)),
    ("int16", 2**15 - 1),
    ("int32", -(2**31)),
    ("int64", 2**63 - 1),
    ("uint8", 2**8 - 1),
    ("uint16", 2**16 - 1),
    ("uint32", 2**32 - 1),
    ("uint64", 2**64 - 1),
    ("float16", 1.5),
    ("float32", -2.25),
    ("float64", 1e300),
    ("boolean", True),
    ("complex64", 1.5 - 2j),
    ("complex128", -1e-300 + 3j),
]


@pytest.mark.parametrize(("name", "value"), SCALARS)
def test_a_scalar_of_each_width_passes_numba_cudas_bytes(name, value):
    from numba.cuda import types

    items = numba_parameters([("scalar", getattr(types, name), value)])
    launch = prebuilt(items)
    sizes = record_sizes(items)
    expected = holder_bytes(items, sizes)
    assert [slot[:size] for slot, size in zip(slots(launch), sizes)] == expected
    width = np.dtype("bool" if name == "boolean" else name).itemsize
    assert sum(sizes) == width == prebuilt_launch.parameter_bytes(getattr(types, name))


@settings(max_examples=30)
@given(values=st.lists(st.one_of(host_arrays(), st.integers(-(2**63), 2**63 - 1)), min_size=1, max_size=6))
def test_a_launchers_argument_list_and_tuples_pass_numba_cudas_bytes(values):
    """Counts (Python ints), arrays and a tuple of them, in one list as a launcher takes them."""
    arguments = [stand_in_device_array(v) if isinstance(v, np.ndarray) else v for v in values]
    arrays = tuple(a for a in arguments if not isinstance(a, int))
    if arrays:
        arguments.append(arrays)  # a tuple of arrays, as a Dict observation's leaves are bound
    items = numba_parameters(arguments)
    launch = prebuilt(items)
    sizes = record_sizes(items)
    assert [slot[:size] for slot, size in zip(slots(launch), sizes)] == holder_bytes(items, sizes)
    from numba.cuda.typing.typeof import Purpose, typeof

    assert len(launch.parameters()) == 8 * len(items)
    assert sum(prebuilt_launch.parameter_bytes(typeof(a, Purpose.argument)) for a in arguments) == sum(
        8 if isinstance(i, int) else s for i, s in zip(items, sizes)
    )


def test_a_record_passes_its_pointer():
    from numba.cuda.cudadrv.devicearray import DeviceRecord

    host = np.zeros(1, dtype=np.dtype([("a", np.float64), ("b", np.int32)]))
    record = DeviceRecord(host.dtype, gpu_data=prebuilt_launch._HostMemory(host.ctypes.data))
    items = numba_parameters([record])
    launch = prebuilt(items)
    assert launch.parameters() == struct.pack("<q", host.ctypes.data)
    assert holder_bytes(items, [8]) == [launch.parameters()]


@settings(max_examples=30)
@given(array=host_arrays())
def test_a_per_call_array_rewrites_exactly_its_data_pointer(array):
    """The same form of array on other memory: only the data pointer changes, to numba's bytes."""
    memory = np.zeros(max(1, array.nbytes // array.itemsize + 64), array.dtype)
    offset = (np.asarray(array.strides) < 0) * (np.asarray(array.shape) - 1) * -np.asarray(array.strides)
    other = np.lib.stride_tricks.as_strided(memory[int(offset.sum()) // array.itemsize :], array.shape, array.strides)
    first, second = stand_in_device_array(array), stand_in_device_array(other)
    launch_kernel, calls = stub_launch()
    launch = PrebuiltLaunch.for_values(0, 1, 1, (7,), (first,), launch_kernel=launch_kernel)
    before = launch.parameters()
    launch(second)
    rebuilt = PrebuiltLaunch.for_values(0, 1, 1, (7,), (second,), launch_kernel=launch_kernel)
    assert launch.parameters() == rebuilt.parameters()
    old = [before[k : k + 8] for k in range(0, len(before), 8)]
    assert [i for i, (a, b) in enumerate(zip(slots(launch), old)) if a != b] == [1 + 4]  # count, then data 5th
    launch(first)
    assert launch.parameters() == before
    assert len(calls) == 2


@settings(max_examples=20)
@given(rows=st.integers(1, 9), extra=st.integers(0, 5))
def test_a_per_call_array_of_another_shape_is_passed_as_numba_passes_it(rows, extra):
    template, other = np.zeros((rows, 3), np.float32), np.ones((rows + extra, 3), np.float32)
    launch_kernel, _ = stub_launch()
    launch = PrebuiltLaunch.for_values(0, 1, 1, (), (stand_in_device_array(template),), launch_kernel=launch_kernel)
    second = stand_in_device_array(other)
    launch(second)
    assert launch.parameters() == struct.pack(
        "<9q", 0, 0, other.size, 4, other.ctypes.data, *other.shape, *other.strides
    )
    assert launch.parameters() == prebuilt(numba_parameters([second])).parameters()


def test_a_per_call_array_of_another_type_is_refused_before_the_launch():
    launch_kernel, calls = stub_launch()
    template = stand_in_device_array(np.zeros((4, 2), np.float32))
    launch = PrebuiltLaunch.for_values(0, 1, 1, (), (template,), launch_kernel=launch_kernel)
    before = launch.parameters()
    for wrong in (np.zeros((4, 2), np.float64), np.zeros((4, 2, 1), np.float32), np.zeros((2, 4), np.float32).T):
        with pytest.raises(TypeError, match=r"per-call value 0: expected array\(float32, 2d, C\) .* got array\("):
            launch(stand_in_device_array(wrong))
    assert launch.parameters() == before and calls == []


def test_a_prebuilt_launch_keeps_what_its_parameters_point_into_alive():
    import gc
    import weakref

    host = np.zeros(8)
    device = stand_in_device_array(host)
    alive = weakref.ref(device)
    launch = PrebuiltLaunch.for_values(0, 1, 1, (device,), launch_kernel=stub_launch()[0])
    del device
    gc.collect()
    assert alive() is not None
    del launch
    gc.collect()
    assert alive() is None


def test_an_argument_kind_without_a_layout_is_refused_by_name():
    with pytest.raises(PrebuiltUnavailable, match=r"type object .* has no known layout"):
        prebuilt([0, object()])


def test_an_unusable_prebuilt_path_falls_back_to_numbas_launch_and_says_why_once(caplog):
    """A dispatcher this path cannot read (another numba-cuda) takes numba's launch, logged once."""
    prebuilt_launch._logged.clear()
    with caplog.at_level(logging.WARNING, logger="kernelgym.core.prebuilt_launch"):
        first = prebuilt_launch.device_launch(object(), 1, 1, (), simulator=False)
        second = prebuilt_launch.device_launch(object(), 1, 1, (), simulator=False)
    assert prebuilt_launch.launch_path(first) == prebuilt_launch.launch_path(second) == "numba"
    messages = [r.getMessage() for r in caplog.records if "prebuilt" in r.getMessage()]
    assert len(messages) == 1 and "lacks 'compile'" in messages[0]


def test_the_launch_path_is_chosen_by_name(monkeypatch):
    monkeypatch.setenv("KERNELGYM_LAUNCH", "numba")
    assert prebuilt_launch.launch_path(prebuilt_launch.device_launch(object(), 1, 1, (), simulator=False)) == "numba"
    monkeypatch.setenv("KERNELGYM_LAUNCH", "fastest")
    with pytest.raises(ValueError, match=r"KERNELGYM_LAUNCH: expected one of \('prebuilt', 'numba'\), got 'fastest'"):
        prebuilt_launch.device_launch(object(), 1, 1, (), simulator=False)


@pytest.mark.parametrize(("name", "dims"), [("griddim", 0), ("blockdim", (1, 2, 3, 4)), ("griddim", (2.5,))])
def test_a_bad_launch_configuration_is_refused_by_name(name, dims):
    kwargs = {"griddim": 1, "blockdim": 1, name: dims}
    with pytest.raises(ValueError, match=rf"{name}: expected 1 to 3 positive ints, got"):
        PrebuiltLaunch(0, kwargs["griddim"], kwargs["blockdim"], [0], launch_kernel=stub_launch()[0])


# ------------------------------------------------------------------------------ on a GPU
@pytest.mark.gpu
def test_on_a_gpu_the_prebuilt_launch_is_taken_and_computes_what_numbas_launch_does(monkeypatch):
    """Both paths over the same kernels: an env kernel with a per-call array swapped between
    calls, and an agent kernel with atomics on a 2-D launch."""
    torch = pytest.importorskip("torch")
    from core_test_kernels import affine, tally
    from kernelgym.core import bind

    results = {}
    for path in ("numba", "prebuilt"):
        monkeypatch.setenv("KERNELGYM_LAUNCH", path)
        xs = [torch.arange(600, dtype=torch.float64, device="cuda").reshape(300, 2) * k for k in (1, 3)]
        out = torch.zeros_like(xs[0])
        launch = bind(
            affine, {"x": xs[0], "out": out, "scale": 2.0, "shift": 1.0}, backend="cuda", num_envs=300, per_call=("x",)
        )
        assert prebuilt_launch.launch_path(launch.launches[0]) == path
        launch(xs[1])
        first = out.clone()
        launch(xs[0])
        totals = torch.zeros(50, dtype=torch.float64, device="cuda")
        visits = torch.zeros((50, 7), dtype=torch.int64, device="cuda")
        per_agent = torch.zeros((50, 7), dtype=torch.int64, device="cuda")
        values = {"totals": totals, "visits": visits, "per_agent": per_agent}
        agents = bind(tally, values, backend="cuda", num_envs=50, num_agents=7)
        assert prebuilt_launch.launch_path(agents.launches[0]) == path
        agents()
        torch.cuda.synchronize()
        results[path] = [first, out, totals, visits, per_agent]
    assert torch.equal(
        results["prebuilt"][0], 2.0 * results["prebuilt"][0].new_tensor(range(600)).reshape(300, 2) * 3 + 1
    )
    for a, b in zip(results["numba"], results["prebuilt"]):
        assert torch.equal(a, b)
