"""The cuda backend on a real GPU (skipped without one): same results as the cpu build."""

import numpy as np
import pytest
from test_core_data_manager import check_log_step, check_reset_device_in_place, check_seed_example

from core_test_kernels import affine, draw_all, draw_bits, tally
from kernelgym.core import CUDADataManager, DataFeed, rng, to_numpy, to_torch
from kernelgym.core.arrays import to_backend

pytestmark = pytest.mark.gpu


def test_env_kernel_matches_cpu_and_launch_does_not_block():
    x = np.random.default_rng(0).normal(size=(10_000, 3))
    out = to_backend(np.zeros_like(x), "cuda")
    affine.launch("cuda", x.shape[0], to_backend(x, "cuda"), out, 1.5, -2.0)
    want = np.zeros_like(x)
    affine.launch("cpu", x.shape[0], x, want, 1.5, -2.0)
    np.testing.assert_array_equal(out.copy_to_host(), want)


def test_agent_kernel_with_atomics_and_strided_agents():
    num_envs, num_agents = 7, 600  # more agents than threads per block
    totals = to_backend(np.zeros(num_envs), "cuda")
    visits = to_backend(np.zeros((num_envs, num_agents), np.int64), "cuda")
    per_agent = to_backend(np.zeros((num_envs, num_agents), np.int64), "cuda")
    tally.launch("cuda", num_envs, num_agents, totals, visits, per_agent)
    np.testing.assert_array_equal(visits.copy_to_host(), 1)
    np.testing.assert_array_equal(totals.copy_to_host(), num_agents * (num_agents + 1) / 2)


def test_rng_bits_and_uniforms_match_the_cpu():
    states = rng.seed_streams(11, 256)
    cpu_bits = np.zeros((256, 4), np.uint64)
    draw_bits.launch("cpu", 256, states.copy(), cpu_bits)
    gpu_bits = to_backend(np.zeros((256, 4), np.uint64), "cuda")
    draw_bits.launch("cuda", 256, to_backend(states, "cuda"), gpu_bits)
    np.testing.assert_array_equal(gpu_bits.copy_to_host(), cpu_bits)
    cpu_all = np.zeros((256, 4))
    draw_all.launch("cpu", 256, states.copy(), cpu_all, -1.0, 1.0, 9)
    gpu_all = to_backend(np.zeros((256, 4)), "cuda")
    draw_all.launch("cuda", 256, to_backend(states, "cuda"), gpu_all, -1.0, 1.0, 9)
    got = gpu_all.copy_to_host()
    np.testing.assert_array_equal(got[:, [0, 1, 3]], cpu_all[:, [0, 1, 3]])
    np.testing.assert_allclose(got[:, 2], cpu_all[:, 2], rtol=1e-12)  # normal: libdevice log/cos


def test_torch_views_alias_device_arrays():
    array = to_backend(np.arange(6.0), "cuda")
    tensor = to_torch(array)
    assert tensor.is_cuda and tensor.data_ptr() == array.__cuda_array_interface__["data"][0]
    tensor += 1
    np.testing.assert_array_equal(to_numpy(array), np.arange(6.0) + 1)


def test_data_manager_on_cuda():
    check_seed_example("cuda")
    check_reset_device_in_place("cuda")
    check_log_step("cuda")
    dm = CUDADataManager(num_envs=3, backend="cuda")
    feed = DataFeed()
    feed.add_data("x", np.arange(6, dtype=np.int64).reshape(3, 2), save_copy_and_apply_at_reset=True)
    dm.push_data_to_device(feed, torch_accessible=True)
    view = dm.data_on_device_via_torch("x")
    view += 100
    dm.data_on_device_via_torch("_done_")[1] = 1
    dm.reset_done_envs()
    assert view.cpu().numpy().tolist() == [[100, 101], [2, 3], [104, 105]]
