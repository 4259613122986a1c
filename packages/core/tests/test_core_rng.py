"""Device RNG: a Python reference model, reproducibility, independence, uniformity."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core_test_kernels import draw_all, draw_bits, draw_per_agent, draw_uniforms
from kernelgym.core import rng, to_numpy
from kernelgym.core.arrays import to_backend

MASK = (1 << 64) - 1


def reference_xoroshiro128plus(s0, s1, count):
    """xoroshiro128+ (Blackman and Vigna, 2016; rotations 24, 16, 37) on Python ints."""

    def rotl(x, k):
        return ((x << k) | (x >> (64 - k))) & MASK

    out = []
    for _ in range(count):
        out.append((s0 + s1) & MASK)
        s1 ^= s0
        s0 = rotl(s0, 24) ^ s1 ^ ((s1 << 16) & MASK)
        s1 = rotl(s1, 37)
    return out, (s0, s1)


def _draw(kernel, backend, states, columns, dtype):
    device_states = to_backend(states, backend)
    device_out = to_backend(np.zeros((states.shape[0], columns), dtype), backend)
    kernel.launch(backend, states.shape[0], device_states, device_out)
    return to_numpy(device_out).copy(), to_numpy(device_states).copy()


@settings(max_examples=20)
@given(st.integers(0, 2**64 - 1), st.integers(1, 8))
def test_streams_match_the_reference_model(seed, num_streams):
    states = rng.seed_streams(seed, num_streams)
    draws, final = _draw(draw_bits, "cpu", states, 5, np.uint64)
    for row in range(num_streams):
        want, want_state = reference_xoroshiro128plus(int(states[row, 0]), int(states[row, 1]), 5)
        assert draws[row].tolist() == want
        assert tuple(int(v) for v in final[row]) == want_state


@settings(max_examples=20)
@given(st.integers(0, 2**32), st.integers(0, 300))
def test_seed_streams_is_reproducible_and_never_zero(seed, num_streams):
    first = rng.seed_streams(seed, num_streams)
    assert first.dtype == np.uint64 and first.shape == (num_streams, 2)
    np.testing.assert_array_equal(first, rng.seed_streams(seed, num_streams))
    assert not np.any((first[:, 0] == 0) & (first[:, 1] == 0))
    # no two streams start equal
    assert len({tuple(row) for row in first.tolist()}) == num_streams
    if num_streams:
        assert not np.array_equal(first, rng.seed_streams(seed + 1, num_streams))


def test_seed_streams_checks_its_arguments():
    with pytest.raises(ValueError, match="num_streams: expected an int >= 0, got -2"):
        rng.seed_streams(0, -2)
    with pytest.raises(TypeError, match="num_streams"):
        rng.seed_streams(0, 2.0)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**32), st.integers(0, 6), st.integers(1, 5), st.integers(1, 4))
def test_agent_streams_are_seed_streams_per_env_and_agent(seed, num_envs, num_agents, more_envs):
    streams = rng.seed_agent_streams(seed, num_envs, num_agents)
    assert streams.dtype == np.uint64 and streams.shape == (num_envs, num_agents, 2)
    # stream agent_stream(env, agent) of the flat table: row [env, agent]
    np.testing.assert_array_equal(streams.reshape(-1, 2), rng.seed_streams(seed, num_envs * num_agents))
    # deterministic, and env i's streams do not depend on the number of envs
    np.testing.assert_array_equal(rng.seed_agent_streams(seed, num_envs + more_envs, num_agents)[:num_envs], streams)
    assert len({tuple(row) for row in streams.reshape(-1, 2).tolist()}) == num_envs * num_agents


def test_seed_agent_streams_checks_its_arguments():
    with pytest.raises(ValueError, match="num_agents: expected an int >= 0, got -1"):
        rng.seed_agent_streams(0, 2, -1)
    with pytest.raises(TypeError, match="num_envs"):
        rng.seed_agent_streams(0, 2.5, 3)


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 6), st.integers(1, 5))
def test_each_agent_draws_from_its_own_stream(seed, num_envs, num_agents):
    streams = rng.seed_agent_streams(seed, num_envs, num_agents)
    table = streams.reshape(-1, 2)  # the kernels' view: the same memory
    out = np.zeros((num_envs, num_agents, 3))
    draw_per_agent.launch("cpu", num_envs, num_agents, table, out)
    # what a thread per stream draws from the same seeds: agent (env, agent) owns row env * num_agents + agent
    expected, expected_states = _draw(
        draw_uniforms, "cpu", rng.seed_streams(seed, num_envs * num_agents), 3, np.float64
    )
    np.testing.assert_array_equal(out.reshape(-1, 3), expected)
    np.testing.assert_array_equal(streams.reshape(-1, 2), expected_states)


def test_uniforms_are_uniform_and_streams_uncorrelated():
    draws, _ = _draw(draw_uniforms, "cpu", rng.seed_streams(7, 64), 4096, np.float64)
    assert draws.min() >= 0.0 and draws.max() < 1.0
    # chi-square over 20 bins per stream and overall (df = 19; 0.999 quantile about 43.8)
    counts = np.stack([np.histogram(row, bins=20, range=(0, 1))[0] for row in draws])
    expected = draws.shape[1] / 20
    chi2 = ((counts - expected) ** 2 / expected).sum(axis=1)
    assert np.median(chi2) < 30.0 and chi2.max() < 60.0
    overall = counts.sum(axis=0)
    assert (((overall - overall.mean()) ** 2) / overall.mean()).sum() < 43.8
    correlation = np.corrcoef(draws)
    off_diagonal = correlation[~np.eye(64, dtype=bool)]
    # 4096 draws: |r| of independent streams is about N(0, 1/64)
    assert np.abs(off_diagonal).max() < 0.08
    assert len({tuple(row) for row in draws[:, :4].tolist()}) == 64


def test_distributions_have_the_right_ranges_and_moments():
    num_streams = 4096
    states = rng.seed_streams(123, num_streams)
    device_states = states.copy()
    rows = []
    for _ in range(8):
        out = np.zeros((num_streams, 4))
        draw_all.launch("cpu", num_streams, device_states, out, -3.0, 5.0, 6)
        rows.append(out)
    draws = np.concatenate(rows)
    uniform, ranged, normal, integers = draws.T
    assert 0.0 <= uniform.min() and uniform.max() < 1.0
    assert -3.0 <= ranged.min() and ranged.max() < 5.0
    assert abs(ranged.mean() - 1.0) < 0.05
    assert abs(normal.mean()) < 0.03 and abs(normal.std() - 1.0) < 0.03
    assert set(np.unique(integers)) == {0, 1, 2, 3, 4, 5}
    counts = np.bincount(integers.astype(np.int64), minlength=6)
    assert (((counts - counts.mean()) ** 2) / counts.mean()).sum() < 20.5  # df=5, p=0.999
    assert np.all(np.isfinite(normal))


def test_randint_with_powers_of_two_and_one():
    states = rng.seed_streams(5, 256)
    out = np.zeros((256, 4))
    draw_all.launch("cpu", 256, states, out, 0.0, 1.0, 1)
    assert np.all(out[:, 3] == 0)
    draw_all.launch("cpu", 256, states, out, 0.0, 1.0, 8)
    assert set(np.unique(out[:, 3])) <= set(range(8))
    assert math.isclose(out[:, 3].mean(), 3.5, abs_tol=0.6)


@pytest.mark.sim
def test_agent_streams_give_the_same_numbers_on_cpu_and_sim():
    streams = rng.seed_agent_streams(3, 4, 5).reshape(-1, 2)
    cpu_states, cpu = streams.copy(), np.zeros((4, 5, 2))
    draw_per_agent.launch("cpu", 4, 5, cpu_states, cpu)
    sim_states, sim = to_backend(streams, "sim"), to_backend(np.zeros((4, 5, 2)), "sim")
    draw_per_agent.launch("sim", 4, 5, sim_states, sim)
    np.testing.assert_array_equal(to_numpy(sim), cpu)
    np.testing.assert_array_equal(to_numpy(sim_states), cpu_states)


@pytest.mark.sim
@settings(max_examples=5)
@given(st.integers(0, 2**64 - 1), st.integers(1, 16))
def test_same_seed_gives_the_same_numbers_on_cpu_and_sim(seed, num_streams):
    states = rng.seed_streams(seed, num_streams)
    for kernel, columns, dtype in ((draw_bits, 3, np.uint64), (draw_uniforms, 3, np.float64)):
        cpu, cpu_state = _draw(kernel, "cpu", states, columns, dtype)
        sim, sim_state = _draw(kernel, "sim", states, columns, dtype)
        np.testing.assert_array_equal(sim, cpu)
        np.testing.assert_array_equal(sim_state, cpu_state)
    cpu_all = np.zeros((num_streams, 4))
    cpu_states = states.copy()
    draw_all.launch("cpu", num_streams, cpu_states, cpu_all, -1.0, 2.0, 7)
    sim_states = to_backend(states, "sim")
    sim_all = to_backend(np.zeros((num_streams, 4)), "sim")
    draw_all.launch("sim", num_streams, sim_states, sim_all, -1.0, 2.0, 7)
    np.testing.assert_array_equal(to_numpy(sim_all), cpu_all)
