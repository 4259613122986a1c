"""Kernels shared by the core tests (module level, so each compiles once per process)."""

import numpy as np

from kernelgym.core import agent_kernel, atomic_add, env_kernel, rng
from kernelgym.core.portable_math import sincos, sincos_as


@env_kernel
def affine(i, x, out, scale, shift):
    for j in range(x.shape[1]):
        out[i, j] = x[i, j] * scale + shift


@env_kernel
def draw_all(i, states, out, low, high, n):
    """One row of every rng draw per env (stream i)."""
    out[i, 0] = rng.uniform(states, i)
    out[i, 1] = rng.uniform_range(states, i, low, high)
    out[i, 2] = rng.normal(states, i)
    out[i, 3] = rng.randint(states, i, n)


@env_kernel
def draw_bits(i, states, out):
    """``out.shape[1]`` raw 64-bit draws from stream i."""
    for j in range(out.shape[1]):
        out[i, j] = rng.next_uint64(states, i)


@env_kernel
def draw_uniforms(i, states, out):
    for j in range(out.shape[1]):
        out[i, j] = rng.uniform(states, i)


@agent_kernel
def tally(env, agent, num_agents, totals, visits, per_agent):
    """Every agent adds agent+1 to its env's total; visits counts (env, agent) calls."""
    atomic_add(totals, env, agent + 1.0)
    atomic_add(visits, (env, agent), 1)
    per_agent[env, agent] = num_agents


@env_kernel
def tick(i, timestep):
    timestep[i] += 1


@env_kernel
def seed_example_kernel(i, x, y):
    """The seed's ``cuda_function(X, Y)``: add X to Y for one row."""
    for j in range(x.shape[1]):
        y[i, j] += x[i, j]


@env_kernel
def scaled_lookup(i, out, table, scale, offset):
    """out[i] = table[i % rows, 0] * scale + offset: data, constants, meta and literals."""
    out[i] = table[i % table.shape[0], 0] * scale + offset


@agent_kernel
def agent_sum(env, agent, num_agents, values, totals):
    atomic_add(totals, env, values[env, agent])


@env_kernel
def row_sum_into(i, out, totals):
    """Reads what ``affine`` wrote for env i: fused after it, the order matters."""
    for j in range(out.shape[1]):
        totals[i] += out[i, j]


@agent_kernel
def draw_per_agent(env, agent, num_agents, states, out):
    """``out.shape[2]`` uniforms per agent, each agent from its own stream of a (num_envs * num_agents, 2) table."""
    stream = rng.agent_stream(env, agent, num_agents)
    for j in range(out.shape[2]):
        out[env, agent, j] = rng.uniform(states, stream)


@agent_kernel
def take_turns(env, agent, num_agents, counter, turn):
    """Each agent notes the turn it ran at in its env: order-dependent on purpose (a race on a GPU)."""
    turn[env, agent] = counter[env]
    counter[env] += 1


@env_kernel
def stamp(i, clock, when):
    """Each env notes when it ran on a clock shared by all envs: order-dependent on purpose."""
    when[i] = clock[0]
    clock[0] += 1


@env_kernel
def portable_sines(i, x, out):
    """``out[i] = (sin, cos)`` of ``x[i]`` by `kernelgym.core.portable_math`."""
    out[i, 0], out[i, 1] = sincos(x[i])


@env_kernel
def portable_sines_float32(i, x, out):
    """``out[i] = (sin, cos)`` of ``x[i]`` in float32 arithmetic (`sincos_as`)."""
    out[i, 0], out[i, 1] = sincos_as(x[i], np.float32)
