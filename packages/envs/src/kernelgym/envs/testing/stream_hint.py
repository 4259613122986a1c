"""`stream_hint`: why a kernel left an env's RNG stream where its reference did not.

A stream is a xoroshiro128+ state with no counter, so the kit counts draws by replaying
them: from the row before the launch, how many draws reach the kernel's row after it and
how many the reference's. A kernel that drew from a wrong stream index (another env's or
agent's row) leaves its own row undrawn and another one drawn twice: each env then shows
"drew 0" or "drew more" from its stream, so the hint names both causes.
"""

from __future__ import annotations

import numpy as np

from kernelgym.core import rng
from kernelgym.envs.runtime.streams import env_streams

__all__ = ["MAX_REPLAYED_DRAWS", "stream_hint"]

MAX_REPLAYED_DRAWS = 64  # draws replayed from a stream's row to count a kernel's draws


def stream_hint(before, kernel_after, reference_after, per_agent: bool) -> str:
    """Which of the env's streams differs, and how many values kernel and reference drew from it.

    Parameters
    ----------
    before, kernel_after, reference_after : array_like of uint64
        The env's stream rows (``(2,)``, or ``(num_agents, 2)`` for ``per_agent``)
        before the launch, after the kernel's launch and after the reference.
    per_agent : bool
        One stream per agent (agent-layout envs): row ``a`` is agent ``a``'s stream.
    """
    before, kernel_after, reference_after = (env_streams(rows) for rows in (before, kernel_after, reference_after))
    hints = []
    for row in range(before.shape[0]):
        if np.array_equal(kernel_after[row], reference_after[row]):
            continue
        stream = f"agent {row}'s stream (row {row} of the env's rng_states)" if per_agent else "the env's stream"
        drawn = _draws(before[row], kernel_after[row])
        expected = _draws(before[row], reference_after[row])
        if drawn is None:
            hints.append(
                f"{stream} is in a state that no 0 to {MAX_REPLAYED_DRAWS} draws from it reach: the kernel "
                "wrote to it, or another thread drew from it (a wrong stream index)"
            )
            continue
        reference = "an unknown number of values" if expected is None else f"{expected}"
        hints.append(
            f"the kernel drew a different number of values: {drawn} from {stream}, the reference "
            f"{reference}; " + _cause(drawn, expected)
        )
    return "; ".join(hints)


def _cause(drawn: int, expected: int | None) -> str:
    if drawn == 0:
        return (
            "a kernel that draws from a wrong stream index (another env's or agent's row) or from no "
            "device stream at all (e.g. numpy's global RNG) leaves its own stream undrawn"
        )
    if expected is not None and drawn > expected:
        return "it drew too often, or another thread drew from this stream too (a wrong stream index elsewhere)"
    return "it drew too rarely, or drew part of its values from a wrong stream index"


def _draws(start, target) -> int | None:
    """How many draws from ``start`` reach ``target`` (None: none up to `MAX_REPLAYED_DRAWS`)."""
    state = np.array(start, dtype=np.uint64).reshape(1, 2)
    target = np.asarray(target, dtype=np.uint64)
    for count in range(MAX_REPLAYED_DRAWS + 1):
        if np.array_equal(state[0], target):
            return count
        rng.next_uint64(state, 0)
    return None
