"""Phases fused into one launch when an env's agents outnumber a block's threads.

Each env's agents are in one block (`kernelgym.core.kernels.agent_grid`); above
`kernels.MAX_AGENT_THREADS` agents its threads stride over them within each phase, and the
block barrier after the phase must make every agent's writes visible to every thread of the
next. Here the second phase reads what ANOTHER agent wrote in the first (its neighbour,
which from agent 255 on belongs to another thread's stride), and an env phase sums the
result in agent order: fused, per phase and the numpy reference agree bit for bit.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernelgym.core import agent_kernel, bind_launches, binding, env_kernel, kernels, to_numpy
from kernelgym.core.arrays import to_backend

LAYOUTS = {"values": "per_agent", "written": "per_agent", "seen": "per_agent"}


@agent_kernel
def write_own(env, agent, num_agents, values, written):
    written[env, agent] = values[env, agent] * 0.5 + agent


@agent_kernel
def read_neighbour(env, agent, num_agents, written, seen):
    seen[env, agent] = written[env, (agent + 1) % num_agents]


@env_kernel
def sum_in_agent_order(env, seen, totals):
    total = 0.0
    for agent in range(seen.shape[1]):
        total += seen[env, agent]
    totals[env] = total


def reference(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    written = values * 0.5 + np.arange(values.shape[1])
    seen = np.roll(written, -1, axis=1)
    totals = np.zeros(values.shape[0])
    for agent in range(values.shape[1]):  # the env phase's order, so the float sum is the same
        totals += seen[:, agent]
    return written, seen, totals


def run(backend, values, fused, monkeypatch):
    num_envs, num_agents = values.shape
    arrays = {
        "values": to_backend(values, backend),
        "written": to_backend(np.zeros_like(values), backend),
        "seen": to_backend(np.zeros_like(values), backend),
        "totals": to_backend(np.zeros(num_envs), backend),
    }
    with monkeypatch.context() as patch:
        if not fused:
            patch.setattr(binding, "_fused", lambda programs, num_envs, num_agents: programs)
        launch = bind_launches(
            [write_own, read_neighbour, sum_in_agent_order],
            arrays,
            backend=backend,
            num_envs=num_envs,
            num_agents=num_agents,
            layouts=LAYOUTS,
        )
    launch()
    return launch.records, tuple(to_numpy(arrays[name]) for name in ("written", "seen", "totals"))


def agent_values(num_envs, num_agents, seed):
    return np.random.default_rng(seed).uniform(-1e3, 1e3, (num_envs, num_agents))


def check(backend, num_envs, num_agents, seed, monkeypatch):
    values = agent_values(num_envs, num_agents, seed)
    fused_records, fused = run(backend, values, True, monkeypatch)
    phased_records, phased = run(backend, values, False, monkeypatch)
    assert len(fused_records) == 1 and len(phased_records) == 3
    blocks, threads = fused_records[0].griddim, fused_records[0].blockdim
    assert (blocks, threads) == kernels.agent_grid(num_envs, num_agents)
    if num_agents > kernels.MAX_AGENT_THREADS:  # one env per block, striding
        assert (blocks, threads) == (num_envs, kernels.MAX_AGENT_THREADS)
    for got, per_phase, want in zip(fused, phased, reference(values)):
        np.testing.assert_array_equal(got, per_phase)
        np.testing.assert_array_equal(got, want)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(num_envs=st.integers(1, 4), num_agents=st.integers(1, 700), seed=st.integers(0, 2**32 - 1))
def test_phases_fuse_into_one_launch_at_any_agent_count_on_cpu(num_envs, num_agents, seed, monkeypatch):
    check("cpu", num_envs, num_agents, seed, monkeypatch)


@pytest.mark.sim
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    num_envs=st.integers(1, 2), num_agents=st.sampled_from([1, 7, 256, 257, 300, 513]), seed=st.integers(0, 2**32 - 1)
)
def test_phases_fuse_into_one_launch_at_any_agent_count_in_the_simulator(num_envs, num_agents, seed, monkeypatch):
    check("sim", num_envs, num_agents, seed, monkeypatch)
