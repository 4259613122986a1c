"""cuda launches run on torch's current stream, read at each call (kernelgym.core.streams).

Without a GPU the seam is checked: `streams.current_stream` is swapped for a counting
stand-in, and the launch must ask it at every call (never at bind time) and configure the
kernel with the stream it names. On a GPU (``gpu``-marked) the launch is ordered with torch
work on a side stream and a bound launch is captured in a ``torch.cuda.graph``.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import cuda

from core_test_kernels import affine, tally
from kernelgym.core import CUDADataManager, DataFeed, FunctionManager, bind, streams, to_numpy
from kernelgym.core.arrays import to_backend


@cuda.jit
def double(x, out):
    """A hand-written per-env cuda kernel (for a function manager)."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i, 0] = 2.0 * x[i, 0]


class Reads:
    """Stands in for `streams.current_stream`: hands out the given handles, counting reads."""

    def __init__(self, handles):
        self.handles = list(handles)
        self.count = 0

    def __call__(self):
        handle = self.handles[self.count % len(self.handles)]
        self.count += 1
        return handle


class ConfigurationLog:
    """A kernel with numba's launch protocol (``kernel[grid, block, stream](*args)``) that
    keeps each configuration and each launch's stream and arguments."""

    def __init__(self):
        self.configurations, self.launches = [], []

    def __getitem__(self, configuration):
        self.configurations.append(configuration)
        stream = configuration[2]
        return lambda *args: self.launches.append((stream, args))


def _numbered_streams(monkeypatch):
    """numba_stream without a GPU: handle h becomes the marker ("stream", h); 0 stays 0."""
    monkeypatch.setattr(streams, "numba_stream", lambda handle: handle and ("stream", handle))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from([0, 11, 22, 33]), min_size=1, max_size=12))
def test_a_stream_launch_reads_the_stream_at_every_call_and_launches_on_it(handles):
    with pytest.MonkeyPatch.context() as monkeypatch:
        _numbered_streams(monkeypatch)
        reads = Reads(handles)
        monkeypatch.setattr(streams, "current_stream", reads)
        kernel = ConfigurationLog()
        launch = streams.StreamLaunch(kernel, 4, 128, ("n", "x"))
        assert reads.count == 0 and kernel.configurations == []  # nothing read or configured at bind time
        for call, _ in enumerate(handles):
            launch(call)
        assert reads.count == len(handles)
        want = [(handle and ("stream", handle), ("n", "x", call)) for call, handle in enumerate(handles)]
        assert kernel.launches == want
        # one configuration per distinct stream, in order of first use: no per-call configure
        first_uses = list(dict.fromkeys(handles))
        assert kernel.configurations == [(4, 128, handle and ("stream", handle)) for handle in first_uses]


def test_a_simulator_launch_is_configured_at_every_call():
    # the simulator's kernel[...] configures the shared kernel object: a cached one could
    # have been reconfigured by another binding since
    with pytest.MonkeyPatch.context() as monkeypatch:
        _numbered_streams(monkeypatch)
        monkeypatch.setattr(streams, "current_stream", Reads([7]))
        kernel = ConfigurationLog()
        launch = streams.StreamLaunch(kernel, 1, 32, (), reconfigure=True)
        for _ in range(3):
            launch()
        assert kernel.configurations == [(1, 32, ("stream", 7))] * 3


def test_the_default_stream_without_a_torch_stream():
    # outside any `torch.cuda.stream` (and with no usable torch CUDA) kernels use stream 0
    assert streams.current_stream() == 0
    assert streams.numba_stream(0) == 0


def test_the_cpu_path_never_reads_a_stream(monkeypatch):
    def refuse():
        raise AssertionError("a cpu launch read the cuda stream")

    monkeypatch.setattr(streams, "current_stream", refuse)
    x = np.arange(6.0).reshape(3, 2)
    out = np.zeros_like(x)
    bind(affine, {"x": x, "out": out, "scale": 2.0, "shift": 1.0}, backend="cpu", num_envs=3)()
    affine.launch("cpu", 3, x, out, 2.0, 1.0)
    np.testing.assert_array_equal(out, 2.0 * x + 1.0)


@pytest.mark.sim
def test_simulator_launches_read_the_stream_at_every_call(monkeypatch):
    reads = Reads([0])
    monkeypatch.setattr(streams, "current_stream", reads)
    x = np.arange(8.0).reshape(4, 2)
    values = {"x": to_backend(x, "sim"), "out": to_backend(np.zeros_like(x), "sim"), "scale": 3.0, "shift": -1.0}
    launch = bind(affine, values, backend="sim", num_envs=4)
    assert reads.count == 0
    for calls in range(1, 4):
        launch()
        assert reads.count == calls
    np.testing.assert_array_equal(to_numpy(values["out"]), 3.0 * x - 1.0)
    # a direct launch reads it too, and so does a function manager's bound launch
    affine.launch("sim", 4, values["x"], values["out"], 1.0, 0.0)
    assert reads.count == 4
    totals = to_backend(np.zeros(2), "sim")
    visits = to_backend(np.zeros((2, 3), np.int64), "sim")
    tally.launch("sim", 2, 3, totals, visits, to_backend(np.zeros((2, 3), np.int64), "sim"))
    assert reads.count == 5
    np.testing.assert_array_equal(to_numpy(totals), 6.0)
    # a hand-written cuda.jit kernel bound by a function manager reads it at each call too
    manager = CUDADataManager(num_envs=4, backend="sim")
    feed = DataFeed()
    feed.add_data("x", x)
    feed.add_data("out", np.zeros_like(x))
    manager.push_data_to_device(feed)
    functions = FunctionManager(manager)
    functions.register("double", double)
    bound = functions.bind("double", "x", "out")
    assert reads.count == 5
    bound()
    bound()
    assert reads.count == 7
    np.testing.assert_array_equal(manager.pull_data_from_device("out")[:, 0], 2.0 * x[:, 0])


class SyncLog:
    """Stands in for a numba stream: logs its synchronizations (the simulator ignores streams)."""

    def __init__(self):
        self.synchronized = 0

    def synchronize(self):
        self.synchronized += 1


@pytest.mark.sim
@pytest.mark.parametrize("handle", [0, 9])
def test_host_copies_go_through_the_current_stream(monkeypatch, handle):
    stream = SyncLog()
    asked = []
    monkeypatch.setattr(streams, "current_stream", lambda: asked.append(handle) or handle)
    monkeypatch.setattr(streams, "numba_stream", lambda h: stream if h == handle and h else 0)
    array = cuda.to_device(np.arange(4.0))
    streams.copy_to_device(array, np.full(4, 5.0))
    np.testing.assert_array_equal(streams.copy_to_host(array), np.full(4, 5.0))
    assert asked == [handle, handle]
    # a read on a torch stream waits for it (one synchronization); on the default stream
    # numba's own copy is synchronous
    assert stream.synchronized == (1 if handle else 0)


# ------------------------------------------------------------------------------ on a GPU
@pytest.mark.gpu
def test_a_launch_on_a_side_stream_is_ordered_with_torch_work_there():
    torch = pytest.importorskip("torch")
    n = 1 << 16
    x = torch.zeros((n, 1), dtype=torch.float64, device="cuda")
    out = torch.zeros_like(x)
    launch = bind(affine, {"x": x, "out": out, "scale": 2.0, "shift": 1.0}, backend="cuda", num_envs=n)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        assert streams.current_stream() == side.cuda_stream
        assert streams.numba_stream(side.cuda_stream) is streams.numba_stream(side.cuda_stream)
        torch.cuda._sleep(50_000_000)  # keeps the side stream busy: an unordered launch runs first
        x.fill_(3.0)
        launch()
        got = out.clone()  # torch's read, on the side stream
    side.synchronize()
    assert torch.equal(got, torch.full_like(x, 7.0))


@pytest.mark.gpu
def test_a_bound_launch_is_captured_in_a_cuda_graph_and_replayed():
    torch = pytest.importorskip("torch")
    x = torch.arange(512, dtype=torch.float64, device="cuda").reshape(256, 2)
    out = torch.zeros_like(x)
    launch = bind(affine, {"x": x, "out": out, "scale": 2.0, "shift": 0.0}, backend="cuda", num_envs=256)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        launch()  # warm-up: compiles and loads the kernel before capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        launch()
        x.add_(1.0)
    start = x.clone()
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(x, start + 3.0)  # the capture ran nothing; each replay ran it all
    assert torch.equal(out, 2.0 * (start + 2.0))


@pytest.mark.gpu
def test_a_host_read_waits_for_the_kernels_on_the_current_stream():
    torch = pytest.importorskip("torch")
    n = 1 << 16
    x = torch.zeros((n, 1), dtype=torch.float64, device="cuda")
    out = torch.zeros_like(x)
    launch = bind(affine, {"x": x, "out": out, "scale": 2.0, "shift": 1.0}, backend="cuda", num_envs=n)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)
        x.fill_(3.0)
        launch()
        host = streams.copy_to_host(cuda.as_cuda_array(out, sync=False))
    np.testing.assert_array_equal(host, 7.0)
