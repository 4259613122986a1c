"""Write-once kernels: results against numpy, argument checks, agent layouts, disk cache."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from core_test_kernels import affine, tally
from kernelgym.core import kernels, to_numpy
from kernelgym.core.arrays import to_backend

FINITE = st.floats(-1e6, 1e6, allow_nan=False)


def _run_affine(backend, x, scale, shift):
    device_x = to_backend(x, backend)
    device_out = to_backend(np.zeros_like(x), backend)
    affine.launch(backend, x.shape[0], device_x, device_out, scale, shift)
    return to_numpy(device_out).copy()


def _run_tally(backend, num_envs, num_agents):
    totals = to_backend(np.zeros(num_envs), backend)
    visits = to_backend(np.zeros((num_envs, num_agents), np.int64), backend)
    per_agent = to_backend(np.zeros((num_envs, num_agents), np.int64), backend)
    tally.launch(backend, num_envs, num_agents, totals, visits, per_agent)
    return to_numpy(totals), to_numpy(visits), to_numpy(per_agent)


@settings(max_examples=30)
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=2, max_dims=2, max_side=40), elements=FINITE), FINITE, FINITE)
def test_env_kernel_matches_numpy_on_cpu(x, scale, shift):
    np.testing.assert_array_equal(_run_affine("cpu", x, scale, shift), x * scale + shift)


@settings(max_examples=20)
@given(st.integers(0, 50), st.integers(0, 20))
def test_agent_kernel_visits_every_agent_once_on_cpu(num_envs, num_agents):
    totals, visits, per_agent = _run_tally("cpu", num_envs, num_agents)
    np.testing.assert_array_equal(visits, np.ones((num_envs, num_agents)))
    np.testing.assert_array_equal(totals, np.full(num_envs, num_agents * (num_agents + 1) / 2))
    np.testing.assert_array_equal(per_agent, np.full((num_envs, num_agents), num_agents))


def test_kernel_keeps_its_python_function_and_body():
    assert affine.py_func(0, np.ones((1, 1)), out := np.zeros((1, 1)), 2.0, 1.0) is None
    assert out[0, 0] == 3.0
    assert affine.__name__ == "affine"
    assert affine.body.py_func is affine.py_func
    assert affine.body.targetoptions["inline"] == "always"


def test_kernels_pickle_by_reference():
    import pickle

    assert pickle.loads(pickle.dumps(affine)) is affine
    assert pickle.loads(pickle.dumps(tally)) is tally


def test_bad_launch_arguments_raise_before_running():
    x = np.ones((4, 2))
    out = np.zeros((4, 2))
    with pytest.raises(ValueError, match="num_envs: expected an int >= 0, got -1"):
        affine.launch("cpu", -1, x, out, 1.0, 0.0)
    with pytest.raises(TypeError, match="num_envs: expected an int, got float"):
        affine.launch("cpu", 2.5, x, out, 1.0, 0.0)
    with pytest.raises(TypeError, match="num_agents: expected an int, got str"):
        tally.launch("cpu", 4, "3", x, out, out)
    with pytest.raises(TypeError, match="argument 1: backend 'cpu' expected a numpy array or a scalar, got list"):
        affine.launch("cpu", 4, x, [0.0], 1.0, 0.0)
    with pytest.raises(TypeError, match="argument 0: expected a numeric array, got dtype object"):
        affine.launch("cpu", 4, np.empty((4, 2), object), out, 1.0, 0.0)
    with pytest.raises(ValueError, match="backend"):
        affine.launch("tpu", 4, x, out, 1.0, 0.0)
    np.testing.assert_array_equal(out, 0.0)


def test_cpu_accepts_cpu_tensors_without_copying():
    import torch

    x = torch.arange(6, dtype=torch.float64).reshape(3, 2)
    out = torch.zeros(3, 2, dtype=torch.float64)
    affine.launch("cpu", 3, x, out, 2.0, 0.5)
    assert torch.equal(out, x * 2.0 + 0.5)


CACHE_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    from cached_kernel import double

    x = np.arange(8.0)
    double.launch("cpu", 8, x)
    stats = double.cpu_launcher(1).stats
    print(json.dumps({"hits": sum(stats.cache_hits.values()), "misses": sum(stats.cache_misses.values()),
                      "x": x.tolist()}))
    """
)


def test_second_process_loads_the_cpu_build_from_the_disk_cache(tmp_path):
    (tmp_path / "cached_kernel.py").write_text(
        "from kernelgym.core import env_kernel\n\n@env_kernel\ndef double(i, x):\n    x[i] *= 2.0\n"
    )
    script = tmp_path / "run.py"
    script.write_text(CACHE_SCRIPT)
    env = dict(os.environ, KERNELGYM_CACHE_DIR=str(tmp_path / "cache"), NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    runs = []
    for _ in range(2):
        result = subprocess.run(
            [sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, env=env, timeout=300
        )
        assert result.returncode == 0, result.stderr
        runs.append(json.loads(result.stdout.strip().splitlines()[-1]))
    assert runs[0]["misses"] == 1 and runs[0]["hits"] == 0
    assert runs[1]["misses"] == 0 and runs[1]["hits"] == 1
    assert runs[0]["x"] == runs[1]["x"] == [2.0 * v for v in range(8)]
    launchers = list((tmp_path / "cache" / "launchers").glob("*.py"))
    assert [path.name.startswith("env_double_1_") for path in launchers] == [True]


WARM_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numba
    import numpy as np
    from numba.core import event
    sys.path.insert(0, sys.argv[1])
    from cached_kernel import double

    compiled = []

    class Compiles(event.Listener):
        def on_start(self, event):
            compiled.append(str(event.data["dispatcher"]))

        def on_end(self, event):
            pass

    event.register("numba:compile", Compiles())
    x = np.arange(8.0)
    double.launch("cpu", 8, x)
    # Numba's lowering modules: imported by a compile, or by Numba's refresh before a cache load
    lowering = "numba.np.arrayobj" in sys.modules
    launched = list(compiled)

    @numba.njit
    def total(values):  # compiled after the cached load: Numba initialises itself as it needs
        return np.sum(values * 2.0)

    from numba.core import inline_closurecall
    print(json.dumps({"x": x.tolist(), "launch_compiled": launched, "lowering": lowering,
                      "total": total(np.arange(5.0)), "copy": type(inline_closurecall.copy).__name__}))
    """
)


def test_a_warm_process_loads_its_launchers_without_compiling_or_loading_numbas_compiler(tmp_path):
    (tmp_path / "cached_kernel.py").write_text(
        "from kernelgym.core import env_kernel\n\n@env_kernel\ndef double(i, x):\n    x[i] *= 2.0\n"
    )
    env = dict(os.environ, KERNELGYM_CACHE_DIR=str(tmp_path / "cache"), NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    runs = []
    for _ in range(2):
        result = subprocess.run(
            [sys.executable, "-c", WARM_SCRIPT, str(tmp_path)], capture_output=True, text=True, env=env, timeout=300
        )
        assert result.returncode == 0, result.stderr
        runs.append(json.loads(result.stdout.strip().splitlines()[-1]))
    cold, warm = runs
    assert cold["launch_compiled"] and cold["lowering"]
    assert warm["launch_compiled"] == [] and not warm["lowering"]
    assert warm["x"] == cold["x"] == [2.0 * v for v in range(8)]
    # a compile after the cached load still works, with the shared-scope inliner installed
    assert warm["total"] == cold["total"] == 20.0
    assert warm["copy"] == cold["copy"] == "_SharedScopeCopy"


HELPER_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    from body_module import scale_all

    x = np.arange(4.0)
    scale_all.launch("cpu", 4, x)
    print(json.dumps(x.tolist()))
    """
)


@pytest.mark.parametrize(
    "helper_place, decorator",
    [
        ("same module", "numba.njit(inline='always')"),
        ("another module", "numba.njit(inline='always')"),
        # compiled on its own and called: its machine code is linked into the cached launcher
        ("another module", "device_function(inline='never')"),
    ],
)
def test_editing_a_helper_the_body_calls_rebuilds_the_launcher(tmp_path, helper_place, decorator):
    # the disk cache once kept the old code: the key covered the body's own source only
    helper = (
        f"import numba\nfrom kernelgym.core import device_function\n\n@{decorator}\ndef factor():\n    return {{}}\n"
    )
    body = "from kernelgym.core import env_kernel\n{}\n\n@env_kernel\ndef scale_all(i, x):\n    x[i] *= factor()\n"
    script = tmp_path / "run.py"
    script.write_text(HELPER_SCRIPT)
    # no .pyc: the two versions of a file have the same size and are written within one
    # second, so Python's mtime+size check would run the first version's bytecode again
    env = dict(
        os.environ,
        KERNELGYM_CACHE_DIR=str(tmp_path / "cache"),
        NUMBA_CACHE_DIR=str(tmp_path / "numba"),
        PYTHONDONTWRITEBYTECODE="1",
    )
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    results = []
    for value in (2.0, 3.0):
        if helper_place == "same module":
            (tmp_path / "body_module.py").write_text(body.format(helper.format(value)))
        else:
            (tmp_path / "helpers.py").write_text(helper.format(value))
            (tmp_path / "body_module.py").write_text(body.format("from helpers import factor"))
        result = subprocess.run(
            [sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, env=env, timeout=300
        )
        assert result.returncode == 0, result.stderr
        results.append(json.loads(result.stdout.strip().splitlines()[-1]))
    assert results == [[2.0 * v for v in range(4)], [3.0 * v for v in range(4)]]


@pytest.mark.sim
@settings(max_examples=10)
@given(
    hnp.arrays(np.float64, st.tuples(st.integers(1, 40), st.integers(1, 3)), elements=FINITE),
    FINITE,
    FINITE,
)
def test_env_kernel_is_bit_identical_on_cpu_and_sim(x, scale, shift):
    np.testing.assert_array_equal(_run_affine("sim", x, scale, shift), _run_affine("cpu", x, scale, shift))


@pytest.mark.sim
@settings(max_examples=15, deadline=None)
@given(num_envs=st.integers(1, 9), num_agents=st.integers(0, 9), block=st.integers(1, 24))
# packed blocks (several envs each, the last one partly empty), strided ones, edge counts
@example(num_envs=3, num_agents=5, block=256)
@example(num_envs=5, num_agents=3, block=8)
@example(num_envs=7, num_agents=4, block=10)
@example(num_envs=2, num_agents=7, block=3)
@example(num_envs=1, num_agents=1, block=256)
@example(num_envs=4, num_agents=0, block=256)
def test_agent_kernel_on_sim_including_packed_and_agent_strided_blocks(num_envs, num_agents, block):
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(kernels, "MAX_AGENT_THREADS", block)
        check_tally_on_sim(num_envs, num_agents)


@settings(max_examples=200)
@given(num_envs=st.integers(1, 10**6), num_agents=st.integers(1, 5000), cap=st.integers(1, 1024))
def test_an_agent_grid_packs_whole_envs_into_blocks_of_at_most_the_cap(num_envs, num_agents, cap):
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(kernels, "MAX_AGENT_THREADS", cap)
        blocks, threads = kernels.agent_grid(num_envs, num_agents)
    per_env = min(num_agents, cap)
    envs_per_block = threads // per_env
    assert threads % per_env == 0 and 1 <= threads <= cap
    # every env has a block, and no block is empty
    assert (blocks - 1) * envs_per_block < num_envs <= blocks * envs_per_block


def test_tags_eleven_agents_run_11_envs_in_a_block():
    assert kernels.MAX_AGENT_THREADS == 256
    assert kernels.agent_grid(2000, 11) == (182, 121)
    assert kernels.agent_grid(3, 11) == (1, 33)
    assert kernels.agent_grid(2000, 1000) == (2000, 256)


def check_tally_on_sim(num_envs, num_agents):
    for got, want in zip(_run_tally("sim", num_envs, num_agents), _run_tally("cpu", num_envs, num_agents)):
        np.testing.assert_array_equal(got, want)
    totals, visits, _ = _run_tally("sim", num_envs, num_agents)
    np.testing.assert_array_equal(visits, np.ones((num_envs, num_agents)))


@pytest.mark.sim
def test_sim_refuses_host_arrays_and_cpu_refuses_device_arrays():
    x = np.ones((4, 2))
    device_x = to_backend(x, "sim")
    with pytest.raises(TypeError, match="argument 0: backend 'sim' expected a device array or a scalar, got ndarray"):
        affine.launch("sim", 4, x, device_x, 1.0, 0.0)
    with pytest.raises(TypeError, match="argument 1: backend 'cpu' expected a numpy array"):
        affine.launch("cpu", 4, x, device_x, 1.0, 0.0)
