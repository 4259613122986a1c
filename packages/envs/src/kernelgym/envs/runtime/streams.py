"""The RNG streams of a batch of envs: one per env, or one per (env, agent).

An env-layout env (one thread per env) has one stream per env: ``rng_states`` is
``(num_envs, 2)`` and env ``i`` draws from row ``i``. An agent-layout env (one thread per
agent) has one stream per (env, agent), so that no two threads of an env share one:
``rng_states`` is ``(num_envs, num_agents, 2)`` on the host (``get_rng_states``), and its
kernels bind the same memory as a ``(num_envs * num_agents, 2)`` table (`stream_table`),
in which agent ``agent`` of env ``env`` draws from stream
``kernelgym.core.rng.agent_stream(env, agent, num_agents)``. An env's reference draws
from that env's streams alone: ``(1, 2)``, or ``(num_agents, 2)`` with agent ``a`` on row
``a`` (`env_streams`).
"""

from __future__ import annotations

import numpy as np

from kernelgym.core import rng

__all__ = ["env_streams", "per_agent_streams", "seed_env_streams", "stream_shape", "stream_table"]


def per_agent_streams(spec) -> bool:
    """Whether ``spec``'s kernels draw from one stream per (env, agent): agent-layout envs."""
    return spec.kernel_layout == "agent"


def stream_shape(spec, num_envs: int, num_agents: int) -> tuple[int, ...]:
    """The host shape of ``rng_states``: ``(num_envs, 2)`` or ``(num_envs, num_agents, 2)``."""
    return (num_envs, num_agents, 2) if per_agent_streams(spec) else (num_envs, 2)


def seed_env_streams(spec, seed, num_envs: int, num_agents: int) -> np.ndarray:
    """``rng_states`` seeded from ``seed`` as the runtime seeds them (deterministic)."""
    if per_agent_streams(spec):
        return rng.seed_agent_streams(seed, num_envs, num_agents)
    return rng.seed_streams(seed, num_envs)


def env_streams(streams) -> np.ndarray:
    """A private copy of one env's streams, as its reference draws from them: ``(k, 2)`` uint64
    (``k`` = 1, or the agent count; agent ``a`` on row ``a``)."""
    return np.array(streams, dtype=np.uint64).reshape(-1, 2)


def stream_table(rng_states):
    """``rng_states`` as kernels bind it: ``(streams, 2)``, the same memory (never a copy).

    A ``(num_envs, num_agents, 2)`` array becomes its ``(num_envs * num_agents, 2)`` view;
    a ``(num_envs, 2)`` one is returned as it is.
    """
    if len(rng_states.shape) == 2:
        return rng_states
    if isinstance(rng_states, np.ndarray):
        # copy=False: an array that cannot be viewed so raises, rather than kernels drawing from a copy
        return rng_states.reshape(-1, 2, copy=False)
    return rng_states.reshape(rng_states.shape[0] * rng_states.shape[1], 2)  # device arrays never copy
