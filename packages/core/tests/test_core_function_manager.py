"""FunctionManager: kernels by name, arguments by data-manager name, hand-written kernels."""

import subprocess
import sys

import numpy as np
import pytest
from numba import cuda, njit, prange

from core_test_kernels import agent_sum, scaled_lookup, tick
from kernelgym.core import BackendUnavailableError, CUDADataManager, DataFeed, FunctionManager
from kernelgym.core.backends import simulator_enabled


@cuda.jit
def add_rows_cuda(values, totals):
    """A hand-written per-agent CUDA kernel (no write-once body)."""
    env = cuda.blockIdx.x
    agent = cuda.threadIdx.x
    if agent < values.shape[1]:
        cuda.atomic.add(totals, env, values[env, agent])


@njit(parallel=True)
def add_rows_cpu(values, totals):
    for env in prange(values.shape[0]):
        for agent in range(values.shape[1]):
            totals[env] += values[env, agent]


def make_managers(backend):
    dm = CUDADataManager(num_agents=3, num_envs=5, episode_length=10, backend=backend)
    feed = DataFeed()
    feed.add_data("out", np.zeros(5))
    feed.add_data("values", np.arange(15, dtype=np.float64).reshape(5, 3), layout="per_agent")
    feed.add_data("totals", np.zeros(5))
    feed.add_data("offset", 0.5)
    dm.push_data_to_device(feed)
    dm.add_shared_constants({"table": np.array([[2.0], [3.0]])})
    dm.add_meta_info({"scale": 10.0})
    return dm, FunctionManager(dm)


def check_launch_by_names(backend):
    dm, fm = make_managers(backend)
    fm.register("lookup", scaled_lookup)
    fm.register("sum", agent_sum)
    assert fm.names == ["lookup", "sum"] and "sum" in fm and fm.get_function("sum") is agent_sum
    fm.launch("lookup", "out", "table", "scale", "offset")
    np.testing.assert_array_equal(dm.pull_data_from_device("out"), [20.5, 30.5, 20.5, 30.5, 20.5])
    fm.launch("lookup", "out", "table", 1.0, -1.0)  # literals next to names
    np.testing.assert_array_equal(dm.pull_data_from_device("out"), [1.0, 2.0, 1.0, 2.0, 1.0])
    run = fm.bind("sum", "values", "totals")
    run()
    run()
    np.testing.assert_array_equal(dm.pull_data_from_device("totals"), 2 * np.arange(15.0).reshape(5, 3).sum(axis=1))


def test_launch_by_names_on_cpu():
    check_launch_by_names("cpu")


@pytest.mark.sim
def test_launch_by_names_on_sim():
    check_launch_by_names("sim")


def test_bound_launch_stays_valid_after_resets():
    dm, fm = make_managers("cpu")
    fm.register("tick", tick)
    run = fm.bind("tick", "_timestep_")
    run()
    dm.reset_device("_timestep_")
    run()
    dm.data_on_device_via_torch("_done_")[1] = 1
    dm.reset_done_envs()
    run()
    assert dm.pull_data_from_device("_timestep_").tolist() == [2, 1, 2, 2, 2]


def test_hand_written_kernel_runs_its_cpu_counterpart_on_cpu():
    dm, fm = make_managers("cpu")
    fm.register("rows", add_rows_cuda, cpu=add_rows_cpu, layout="per_agent")
    fm.launch("rows", "values", "totals")
    np.testing.assert_array_equal(dm.pull_data_from_device("totals"), np.arange(15.0).reshape(5, 3).sum(axis=1))


def test_registration_and_launch_errors_name_the_kernel():
    dm, fm = make_managers("cpu")
    fm.register("lookup", scaled_lookup)
    with pytest.raises(ValueError, match="lookup: a kernel is already registered"):
        fm.register("lookup", tick)
    with pytest.raises(KeyError, match=r"'missing': no kernel registered under this name; registered: \['lookup'\]"):
        fm.launch("missing")
    with pytest.raises(TypeError, match="lookup: expects 4 kernel arguments, got 2"):
        fm.launch("lookup", "out", "table")
    with pytest.raises(KeyError, match="'nothing': not data, meta info or a shared constant"):
        fm.launch("lookup", "out", "nothing", 1.0, 0.0)
    with pytest.raises(ValueError, match="rows: a hand-written CUDA kernel needs a cpu counterpart on the cpu backend"):
        fm.register("rows", add_rows_cuda, layout="per_agent")
    if not simulator_enabled():
        with pytest.raises(BackendUnavailableError, match="rows: allow_simulator=True needs NUMBA_ENABLE_CUDASIM=1"):
            fm.register("rows", add_rows_cuda, layout="per_agent", allow_simulator=True)
    with pytest.raises(ValueError, match="t: an EnvKernel launches per_env, got layout='per_agent'"):
        fm.register("t", tick, layout="per_agent")
    with pytest.raises(ValueError, match="t: a write-once kernel builds its own cpu version"):
        fm.register("t", tick, cpu=add_rows_cpu)
    with pytest.raises(
        TypeError, match="f: expected an env_kernel, an agent_kernel or a numba.cuda.jit kernel, got function"
    ):
        fm.register("f", lambda: None)
    with pytest.raises(ValueError, match="r: layout must be one of"):
        fm.register("r", add_rows_cuda, cpu=add_rows_cpu, layout="per_block")
    no_agents = FunctionManager(CUDADataManager(num_envs=2, backend="cpu"))
    with pytest.raises(ValueError, match="sum: layout 'per_agent' needs the data manager's num_agents"):
        no_agents.register("sum", agent_sum)
    with pytest.raises(ValueError, match="data_manager: its num_envs is None"):
        FunctionManager(CUDADataManager(backend="cpu"))
    with pytest.raises(TypeError, match="data_manager: expected a CUDADataManager"):
        FunctionManager(object())
    assert fm.names == ["lookup"]


@pytest.mark.sim
def test_hand_written_kernel_on_sim_and_simulated_on_cpu_with_a_warning():
    dm, fm = make_managers("sim")
    fm.register("rows", add_rows_cuda, layout="per_agent")
    fm.launch("rows", "values", "totals")
    want = np.arange(15.0).reshape(5, 3).sum(axis=1)
    np.testing.assert_array_equal(dm.pull_data_from_device("totals"), want)
    cpu_dm, cpu_fm = make_managers("cpu")
    with pytest.warns(RuntimeWarning, match="rows: no cpu counterpart; this kernel runs in the CUDA SIMULATOR"):
        cpu_fm.register("rows", add_rows_cuda, layout="per_agent", allow_simulator=True)
    cpu_fm.launch("rows", "values", "totals")
    np.testing.assert_array_equal(cpu_dm.pull_data_from_device("totals"), want)


@pytest.mark.parametrize("backend", ["cpu", pytest.param("sim", marks=pytest.mark.sim)])
def test_demo_runs_and_resets_the_done_envs(backend):
    result = subprocess.run(
        [sys.executable, "-m", "kernelgym.core.demo", "--backend", backend, "--num-envs", "8", "--steps", "3"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    lines = dict(line.split(":", 1) for line in result.stdout.splitlines() if ":" in line)
    assert lines["backend"].strip().startswith(backend)
    assert lines["done"].strip() == "[]"
    assert "after reset_done_envs" in result.stdout
