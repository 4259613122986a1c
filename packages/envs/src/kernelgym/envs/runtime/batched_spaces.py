"""Batched spaces whose bounds do not grow with the batch: broadcast views of one env's.

gymnasium's ``batch_space`` tiles a Box's bounds: at 2,000 envs x 1,000 agents x 7,001
observation values that is four arrays of 14 G elements (low, high and the two bounded
masks) before any buffer exists. `batch` builds the same spaces (same types, shapes,
dtypes, bounds and samplers) but a batched Box keeps one env's bounds and exposes
``low``, ``high``, ``bounded_below`` and ``bounded_above`` as read-only broadcast views
of them: gymnasium's own methods (``contains``, ``sample``, ``is_bounded``) work on the
views unchanged, and copies and pickles carry the small arrays only.
"""

from __future__ import annotations

from copy import deepcopy

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import batch_space

__all__ = ["BroadcastBox", "batch"]


class BroadcastBox(spaces.Box):
    """A Box of shape ``shape`` whose bounds are broadcast views of smaller arrays.

    Parameters
    ----------
    low, high : numpy.ndarray
        Bounds that broadcast to ``shape`` (typically one env's bounds).
    shape : tuple of int
    dtype : numpy dtype
    seed : optional
        As for ``gymnasium.spaces.Box``.
    """

    def __init__(self, low, high, shape, dtype, seed=None):
        low, high = np.asarray(low), np.asarray(high)
        # gymnasium checks and casts the small bounds; only the views are full-size
        super().__init__(low=low, high=high, dtype=dtype, seed=seed)
        self._compact = (self.low, self.high, self.bounded_below, self.bounded_above)
        self._set_shape(tuple(int(dim) for dim in shape))

    def _set_shape(self, shape):
        self._shape = shape
        self.low, self.high, self.bounded_below, self.bounded_above = (
            np.broadcast_to(array, shape) for array in self._compact
        )
        low, high = self._compact[:2]
        # gymnasium's repr reduces the bounds: take the small arrays' when they are uniform
        self.low_repr = str(low.min()) if low.size and low.min() == low.max() else None
        self.high_repr = str(high.min()) if high.size and high.min() == high.max() else None

    def __eq__(self, other, /) -> bool:
        if isinstance(other, BroadcastBox) and self.shape == other.shape and self.dtype == other.dtype:
            # equal bounds everywhere iff the small arrays broadcast to equal values
            low, high = (
                np.broadcast_arrays(self._compact[0], other._compact[0]),
                np.broadcast_arrays(self._compact[1], other._compact[1]),
            )
            return bool(np.allclose(low[0], low[1]) and np.allclose(high[0], high[1]))
        return super().__eq__(other)

    def __getstate__(self):
        state = dict(self.__dict__)
        for name in ("low", "high", "bounded_below", "bounded_above"):
            del state[name]  # views: rebuilt from _compact, never copied full-size
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._set_shape(state["_shape"])


def _batch_once(space, n: int):
    seed = deepcopy(space.np_random)
    if isinstance(space, BroadcastBox):
        low, high = space._compact[:2]
        return BroadcastBox(low, high, (n, *space.shape), space.dtype, seed)
    if isinstance(space, spaces.Box):
        return BroadcastBox(space.low, space.high, (n, *space.shape), space.dtype, seed)
    if isinstance(space, spaces.MultiDiscrete):
        return BroadcastBox(space.start, space.start + space.nvec - 1, (n, *space.shape), space.dtype, seed)
    if isinstance(space, spaces.MultiBinary):
        zeros = np.zeros(space.shape, space.dtype)
        return BroadcastBox(zeros, zeros + 1, (n, *space.shape), space.dtype, seed)
    if isinstance(space, spaces.Dict):
        return spaces.Dict(
            {key: _batch_once(sub, n) for key, sub in space.items()}, seed=seed, sort_keys=space.sort_keys
        )
    if isinstance(space, spaces.Tuple):
        return spaces.Tuple(tuple(_batch_once(sub, n) for sub in space.spaces), seed=seed)
    return batch_space(space, n)  # Discrete -> MultiDiscrete(n): its size is n, not N x A x obs


def batch(space, counts):
    """``space`` batched over ``counts`` (innermost first), as gymnasium's ``batch_space``
    applied once per count, with every Box a `BroadcastBox`.

    Parameters
    ----------
    space : gymnasium.spaces.Space
        One env's (one agent's) space.
    counts : iterable of int
        E.g. ``(num_agents, num_envs)``: the result's shape starts ``(num_envs, num_agents)``.
    """
    for count in counts:
        space = _batch_once(space, count)
    return space
