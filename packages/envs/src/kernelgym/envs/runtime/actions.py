"""Action checks: copy the actions into the fixed buffer, refuse bad ones before any kernel runs."""

from __future__ import annotations

import functools
import math

import numba
import numpy as np
import torch
from gymnasium import spaces

from kernelgym.core import to_numpy

__all__ = ["ActionLoader"]


@numba.njit(cache=True)
def _first_out_of_range(rows, low, high):
    """Flat index of the first integer action outside [low, high] (per column), or -1."""
    for r in range(rows.shape[0]):
        for c in range(rows.shape[1]):
            value = rows[r, c]
            if value < low[c] or value > high[c]:
                return r * rows.shape[1] + c
    return -1


@numba.njit(cache=True)
def _first_non_finite(flat):
    """Index of the first NaN or infinite action, or -1."""
    for k in range(flat.shape[0]):
        if not math.isfinite(flat[k]):
            return k
    return -1


class ActionLoader:
    """Copies actions into the env's action buffer after checking them.

    Parameters
    ----------
    space : gymnasium Space
        One agent's action space.
    actions : backend array
        The action buffer.
    actions_tensor : torch.Tensor
        Its zero-copy torch view.
    backend : str
    device : torch.device
    check_values : bool
        Check discrete actions against the space and continuous ones for NaN and inf.
    """

    def __init__(self, space, actions, actions_tensor, backend, device, check_values: bool):
        self.space, self.backend, self.device, self.check_values = space, backend, device, check_values
        self._actions, self._actions_t = actions, actions_tensor
        self.discrete = isinstance(space, (spaces.Discrete, spaces.MultiDiscrete))
        if isinstance(space, spaces.Discrete):
            low = np.array([space.start], dtype=np.int64)
            high = low + space.n - 1
        elif isinstance(space, spaces.MultiDiscrete):
            low = np.asarray(space.start, dtype=np.int64).reshape(-1)
            high = low + np.asarray(space.nvec, dtype=np.int64).reshape(-1) - 1
        else:
            low = high = None
        self._low, self._high = low, high
        if backend != "cuda":
            # a numpy view of the action buffer: one row per discrete action, flat for Box
            self._rows = to_numpy(actions).reshape((-1, low.shape[0]) if self.discrete else -1)
        elif low is not None:
            self._low_t = torch.as_tensor(low, device=device)
            self._high_t = torch.as_tensor(high, device=device)

    def load(self, actions) -> None:
        """Copy ``actions`` into the action buffer after checking them (no kernel runs before)."""
        if isinstance(actions, torch.Tensor):
            if actions.device != self.device and not (actions.device.type == self.device.type == "cuda"):
                raise ValueError(f"actions: expected a tensor on {self.device}, got one on {actions.device}")
            dtype = _numpy_dtype(actions.dtype)
        elif isinstance(actions, np.ndarray):
            dtype = actions.dtype
        else:
            raise TypeError(f"actions: expected a torch.Tensor or numpy.ndarray, got {type(actions).__name__}")
        if tuple(actions.shape) != self._actions.shape:
            if isinstance(self.space, spaces.Discrete) and tuple(actions.shape) == (*self._actions.shape, 1):
                actions = actions.reshape(self._actions.shape)  # (N, 1) as SB3 and skrl shape Discrete actions
            else:
                raise ValueError(f"actions: expected shape {self._actions.shape}, got {tuple(actions.shape)}")
        if self.discrete:
            if dtype is None or dtype.kind not in "iu":
                raise TypeError(f"actions: expected an integer dtype for {self.space}, got {actions.dtype}")
        elif dtype is None or dtype.kind not in "f":
            raise TypeError(f"actions: expected a float dtype for {self.space}, got {actions.dtype}")
        if self.backend == "cuda":
            self._load_cuda(actions)
            return
        source = actions.detach().numpy() if isinstance(actions, torch.Tensor) else actions
        np.copyto(self._rows.reshape(self._actions.shape), source, casting="unsafe")
        if not self.check_values:
            return
        if self.discrete:
            bad = _first_out_of_range(self._rows, self._low, self._high)
        else:
            bad = _first_non_finite(self._rows)
        if bad >= 0:
            self._raise_bad_action(source, bad)

    def _load_cuda(self, actions) -> None:
        source = torch.as_tensor(actions) if isinstance(actions, np.ndarray) else actions
        self._actions_t.copy_(source)
        if not self.check_values:
            return
        flat = self._actions_t.reshape(-1, 1 if self._low is None else self._low.shape[0])
        if self.discrete:
            bad = ((flat < self._low_t) | (flat > self._high_t)).reshape(-1)
        else:
            bad = ~torch.isfinite(flat.reshape(-1))
        if bool(bad.any()):
            self._raise_bad_action(to_numpy(actions), int(bad.nonzero()[0, 0]))

    def _raise_bad_action(self, actions, flat_index: int):
        host = np.asarray(actions)
        position = tuple(int(k) for k in np.unravel_index(flat_index, host.shape))
        value = host[position].item()
        if self.discrete:
            raise ValueError(f"actions: expected values in {self.space}, got {value!r} at index {position}")
        raise ValueError(f"actions: expected finite values, got {value!r} at index {position}")


@functools.lru_cache(maxsize=None)
def _numpy_dtype(torch_dtype):
    """numpy's twin of a torch dtype (cached: no tensor is made per step), or None."""
    try:
        return np.dtype(torch.empty((), dtype=torch_dtype).numpy().dtype)
    except TypeError:  # bfloat16 and friends have no numpy twin
        return None
