"""Counter-free device RNG: one xoroshiro128+ stream per row of a ``(num_streams, 2)`` array.

Written as plain integer device functions, so cpu, simulator and CUDA kernels share one
source and give the same numbers for the same seed. ``numba.cuda.random`` is not used: it
compiles in object mode under the simulator and breaks cpu ``njit`` users there.

```python
states = rng.seed_streams(seed=0, num_streams=num_envs)   # host, uint64 (N, 2)

@env_kernel
def noise(i, states, out):
    out[i] = rng.normal(states, i)
```

Each stream is owned by one thread at a time: a thread draws only from its own stream.

- Env layout (``@env_kernel``, one thread per env): one stream per env, ``(num_envs, 2)``
  from `seed_streams`; env ``i`` draws from stream ``i``.
- Agent layout (``@agent_kernel``, one thread per agent): one stream per (env, agent),
  ``(num_envs, num_agents, 2)`` from `seed_agent_streams`. Kernels see them as a
  ``(num_envs * num_agents, 2)`` table (the same memory, flattened) and agent ``agent`` of
  env ``env`` draws from stream ``agent_stream(env, agent, num_agents)`` =
  ``env * num_agents + agent``. Agent threads of one env run concurrently on a GPU: two
  of them drawing from one stream race (the draws each gets depend on scheduling).

```python
states = rng.seed_agent_streams(seed=0, num_envs=n, num_agents=a)  # host, (n, a, 2)

@agent_kernel
def jitter(env, agent, num_agents, rng_states, x):   # rng_states: (n * a, 2)
    x[env, agent] += rng.uniform(rng_states, rng.agent_stream(env, agent, num_agents))
```

Both are deterministic from the seed, and env ``i``'s streams do not depend on
``num_envs`` (`seed_agent_streams` is `seed_streams` of ``num_envs * num_agents``
streams, reshaped).

``uniform``, ``uniform_range``, ``randint`` and ``next_uint64`` are bit-identical on every
backend; ``normal`` uses ``log``/``cos``, whose last bit may differ on a GPU (libdevice).
``uniform_as`` and ``uniform_range_as`` draw in a given float type (``real``,
``numpy.float32`` or ``numpy.float64``) with that type's arithmetic only: a kernel
compiled for float32 does no float64 work to draw (the float64 draws equal ``uniform``'s).
"""

from __future__ import annotations

import math

import numpy as np

from kernelgym.core.device_functions import device_function

__all__ = [
    "seed_streams",
    "seed_agent_streams",
    "agent_stream",
    "next_uint64",
    "uniform",
    "uniform_range",
    "uniform_as",
    "uniform_range_as",
    "normal",
    "randint",
]

# Constants as uint64: numba turns uint64-with-int64 arithmetic into float64.
_U24 = np.uint64(24)
_U40 = np.uint64(40)
_U16 = np.uint64(16)
_U37 = np.uint64(37)
_U27 = np.uint64(27)
_U11 = np.uint64(11)
_ONE = np.uint64(1)
_TWO_POW_MINUS_53 = 1.0 / 9007199254740992.0
_TWO_PI = 2.0 * math.pi


def _check_seed(seed) -> None:
    """A TypeError/ValueError naming ``seed`` unless SeedSequence takes it: None, int >= 0, or a sequence of them."""
    if seed is None:
        return
    entropy = list(seed) if isinstance(seed, (list, tuple, np.ndarray)) else [seed]
    for value in entropy:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise TypeError(
                f"seed: expected None, an int >= 0 or a sequence of them, got {type(value).__name__} {value!r}"
            )
        if value < 0:
            raise ValueError(f"seed: expected None, an int >= 0 or a sequence of them, got {seed!r}")


def seed_streams(seed, num_streams: int) -> np.ndarray:
    """Independent stream states from ``numpy.random.SeedSequence(seed)``.

    Parameters
    ----------
    seed : int, sequence of int or None
        Entropy for ``SeedSequence`` (``None`` draws fresh entropy from the OS).
    num_streams : int
        Number of streams (rows).

    Returns
    -------
    numpy.ndarray
        ``uint64`` array of shape ``(num_streams, 2)``, never an all-zero row.
    """
    from kernelgym.core.arrays import allocation
    from kernelgym.core.kernels import check_count

    num_streams = check_count("num_streams", num_streams)
    _check_seed(seed)
    with allocation("num_streams", (num_streams, 2), np.uint64):
        words = np.random.SeedSequence(seed).generate_state(2 * num_streams, dtype=np.uint64)
    states = words.reshape(num_streams, 2)
    # xoroshiro128+ never leaves the all-zero state; SeedSequence makes one astronomically
    # unlikely, and this keeps it impossible.
    states[(states[:, 0] == 0) & (states[:, 1] == 0), 1] = 1
    return states


def seed_agent_streams(seed, num_envs: int, num_agents: int) -> np.ndarray:
    """One stream per (env, agent), for agent-layout kernels (module docstring).

    Parameters
    ----------
    seed : int, sequence of int or None
        As for `seed_streams`.
    num_envs, num_agents : int

    Returns
    -------
    numpy.ndarray
        ``uint64`` array of shape ``(num_envs, num_agents, 2)``: ``seed_streams(seed,
        num_envs * num_agents)`` reshaped, so row ``[env, agent]`` is stream
        ``agent_stream(env, agent, num_agents)`` of the flattened table.
    """
    from kernelgym.core.kernels import check_count

    num_envs = check_count("num_envs", num_envs)
    num_agents = check_count("num_agents", num_agents)
    return seed_streams(seed, num_envs * num_agents).reshape(num_envs, num_agents, 2)


@device_function
def agent_stream(env, agent, num_agents):
    """The stream agent ``agent`` of env ``env`` owns in a ``(num_envs * num_agents, 2)`` table."""
    return env * num_agents + agent


@device_function
def next_uint64(states, s):
    """The next 64 random bits of stream ``s`` (a ``uint64``); advances the stream."""
    s0 = states[s, 0]
    s1 = states[s, 1]
    result = s0 + s1
    s1 ^= s0
    states[s, 0] = ((s0 << _U24) | (s0 >> _U40)) ^ s1 ^ (s1 << _U16)
    states[s, 1] = (s1 << _U37) | (s1 >> _U27)
    return result


@device_function
def uniform(states, s):
    """A float64 uniform in ``[0, 1)`` (53 random bits)."""
    return (next_uint64(states, s) >> _U11) * _TWO_POW_MINUS_53


@device_function
def uniform_range(states, s, low, high):
    """A float64 uniform in ``[low, high)``."""
    return low + (high - low) * uniform(states, s)


@device_function
def uniform_as(states, s, real):
    """A uniform in ``[0, 1)`` of type ``real``, exact in it: float32 from 24 random bits, float64
    from 53 (the value `uniform` draws)."""
    # a constant test of the type's significand, folded by the compiler: 2**24 + 1 rounds
    # to 2**24 in float32 only
    if real(16777217.0) == real(16777216.0):
        return real(next_uint64(states, s) >> _U40) * real(1.0 / 16777216.0)
    return real(next_uint64(states, s) >> _U11) * real(_TWO_POW_MINUS_53)


@device_function
def uniform_range_as(states, s, low, high, real):
    """A uniform in ``[low, high)`` of type ``real`` (``low`` and ``high`` of that type), in its
    arithmetic; in float64 the value `uniform_range` draws."""
    return low + (high - low) * uniform_as(states, s, real)


@device_function
def normal(states, s):
    """A standard normal float64 (Box-Muller; one of the pair is used)."""
    u1 = 1.0 - uniform(states, s)  # in (0, 1]: log is finite
    u2 = uniform(states, s)
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(_TWO_PI * u2)


@device_function
def randint(states, s, n):
    """An int64 uniform in ``[0, n)`` for ``n >= 1``, without modulo bias (rejection)."""
    bound = np.uint64(n)
    # Largest multiple of bound that fits: draws at or above it would bias small values.
    limit = np.uint64(0) - ((np.uint64(0) - bound) % bound)
    draw = next_uint64(states, s)
    while limit != np.uint64(0) and draw >= limit:
        draw = next_uint64(states, s)
    return np.int64(draw % bound)
