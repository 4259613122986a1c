"""The hand-written CUDA C TagGridWorld baseline (benchmarks/tag_cuda_c): NVRTC compiles it for
sm_80 and sm_90 without a GPU (``gpu_compile``), and its kernel, run on the host by g++ with a
thread per CUDA thread and a barrier for ``__syncthreads``, equals kernelgym's cpu
TagGridWorld (partial observation) bit for bit, autoresets included. The GPU check
(benchmarks/gpu_check/tag_baseline.py) runs the same comparison on a GPU.
"""

import ctypes
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from tag_cuda_c import baseline  # noqa: E402

from kernelgym.core import gpu_compile  # noqa: E402
from kernelgym.envs.tag.gridworld import TagGridWorldParams  # noqa: E402

# many taggers on a small grid: tags, terminations and resets within a few steps; short
# episodes: truncations too
CROWDED = TagGridWorldParams(num_taggers=6, num_runners=3, grid_length=3, episode_length=9, use_full_observation=False)


@pytest.mark.gpu_compile
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_nvrtc_compiles_the_baseline_to_ptx_and_cubin(arch):
    params = TagGridWorldParams(num_taggers=999, num_runners=1, use_full_observation=False)
    ptx = baseline.compile_source(params, arch, "ptx").decode()
    assert f".target {arch}" in ptx and ".entry tag_gridworld_step" in ptx
    assert "fma.rn.f64" not in ptx  # --fmad=false, as kernelgym's cuda build
    cubin = baseline.compile_source(params, arch, "cubin")
    assert cubin[:4] == b"\x7fELF"
    # one thread per agent: 1,000 agents launch 1,024 threads, so at most 64 registers each
    resources = gpu_compile.ptxas_resources(ptx.rstrip("\0"), (int(arch[3]), int(arch[4])))
    assert resources["registers"] <= 64 and resources["spill_store_bytes"] == 0, resources
    assert resources["shared_bytes"] == 12 * params.num_agents + 4  # x, y, in-game flag per agent; the tag count


def test_the_baseline_refuses_what_it_does_not_implement():
    with pytest.raises(ValueError, match=r"use_full_observation: expected False"):
        baseline.defines(TagGridWorldParams())
    with pytest.raises(ValueError, match=r"num_agents: expected at most 1024 .*, got 1025"):
        baseline.defines(TagGridWorldParams(num_taggers=1024, use_full_observation=False))
    with pytest.raises(ValueError, match=r"arch: expected a real architecture like 'sm_90', got 'compute_90'"):
        baseline.compile_source(CROWDED, "compute_90", "ptx")


def host_kernel(params, directory: Path):
    """The baseline's kernel built by g++ for the host (tests/cuda_host_emulation.hpp)."""
    library = directory / "tag_host.so"
    command = [
        shutil.which("g++"),
        "-std=c++20",
        "-O1",
        "-ffp-contract=off",  # as --fmad=false on the GPU
        "-shared",
        "-fPIC",
        "-pthread",
        f"-I{Path(__file__).parent}",
        f'-DKERNEL_SOURCE="{baseline.SOURCE}"',
        *baseline.defines(params),
        str(Path(__file__).with_name("cuda_host_launch.cpp")),
        "-o",
        str(library),
    ]
    subprocess.run(command, check=True, capture_output=True, text=True)
    return ctypes.CDLL(str(library)).launch_tag_gridworld_step


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ (C++20) to run the CUDA C kernel on the host")
def test_the_cuda_c_kernel_equals_kernelgym_step_for_step(tmp_path):
    import kernelgym.envs as kge

    params = CROWDED
    launch = host_kernel(params, tmp_path)
    num_envs, agents = 3, params.num_agents
    state = {
        "loc_x": np.zeros((num_envs, agents), np.int32),
        "loc_y": np.zeros((num_envs, agents), np.int32),
        "in_game": np.zeros((num_envs, agents), np.bool_),
        "timestep": np.zeros(num_envs, np.int32),
        "runners_left": np.zeros(num_envs, np.int32),
        "done": np.ones(num_envs, np.bool_),  # the first launch resets every env
    }
    out = {
        "obs": np.zeros((num_envs, agents, 6), np.float32),
        "rewards": np.zeros((num_envs, agents), np.float32),
        "terminated": np.zeros(num_envs, np.bool_),
        "truncated": np.zeros(num_envs, np.bool_),
    }
    names = ["loc_x", "loc_y", "in_game", "timestep", "runners_left", "done", "actions", "obs", "rewards"]
    names += ["terminated", "truncated"]

    def step(actions):
        arrays = state | out | {"actions": np.ascontiguousarray(actions, np.int64)}
        launch(num_envs, -(-agents // 32) * 32, *(ctypes.c_void_p(arrays[name].ctypes.data) for name in names))

    env = kge.make("TagGridWorld-v0", num_envs, backend="cpu", seed=0, **params.__dict__)
    obs, _ = env.reset(seed=0)
    step(np.zeros((num_envs, agents)))
    np.testing.assert_array_equal(out["obs"], np.asarray(obs))
    generator = np.random.default_rng(3)
    ended = 0
    for number in range(1, 31):
        actions = generator.integers(0, 5, size=(num_envs, agents))
        expected = dict(zip(out, env.step(actions, numpy=True)[:4]))
        step(actions)
        for name, value in out.items():
            assert value.dtype == expected[name].dtype, name
            np.testing.assert_array_equal(value, expected[name], err_msg=f"{name} at step {number}")
        ended += int((out["terminated"] | out["truncated"]).sum())
    env.close()
    assert ended >= 3  # the comparison went through episode ends and NEXT_STEP resets
