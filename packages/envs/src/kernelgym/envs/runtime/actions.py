"""Actions: how they reach the composed kernel, and how their values are checked in it.

Every step's actions land in the fixed action buffer (the data manager's ``actions``),
so that the buffer always holds the actions just stepped. On ``cpu`` an array of the
buffer's dtype and C layout takes one plain memory copy into it (no allocation, no
cast, no type checks: the fast path); anything else is checked and copied once,
casting. On ``cuda`` and ``sim`` the actions go through one device copy into that
buffer (asynchronous on a GPU; numba would otherwise synchronize on a foreign stream).

The VALUES are checked inside the composed launch: the check bodies below return env
``i``'s fault code (the flat index of its first bad action, or -1), a pass that
vectorizes on cpu; a failing env's actions are kept in a per-env slot
(`keep_bad_action`); the launch records the smallest code in a one-element
buffer (`kernelgym.core.binding.Precondition`) and runs no env whose action is bad (on
cpu: no env at all). The host turns a recorded fault into today's error message
(`ActionLoader.raise_fault`), right after the launch (``"sync"``) or at the next read of
results (``"deferred"``, the cuda and sim default: no host synchronization per step; the
simulator models the GPU, so that what passes there holds on cuda).
"""

from __future__ import annotations

import functools
import math
import sys

import numpy as np
from gymnasium import spaces

from kernelgym.core import env_kernel, streams, to_numpy, to_torch
from kernelgym.core.arrays import is_torch_tensor
from kernelgym.core.binding import NO_FAULT, Precondition
from kernelgym.envs.runtime.state_io import checked_cast

__all__ = ["ActionLoader", "CHECK_MODES", "check_mode", "one_action"]

# check_action_values: True picks the backend's default mode.
CHECK_MODES = (True, False, "sync", "deferred")


def check_mode(value, backend: str):
    """``"sync"``, ``"deferred"`` or None (no check) for a ``check_action_values`` argument.

    True picks the backend's default: ``"deferred"`` on cuda and on sim (the simulator
    models the GPU, deferred errors included), ``"sync"`` on cpu.
    """
    if not any(value is mode or (isinstance(value, str) and value == mode) for mode in CHECK_MODES):
        raise TypeError(f"check_action_values: expected True, False, 'sync' or 'deferred', got {value!r}")
    if value is False:
        return None
    if value is True:
        return "sync" if backend == "cpu" else "deferred"
    return value


# The checks are pure and branch-free (``|``, no early return), so that the cpu pass
# over every env vectorizes; `keep_bad_actions` runs only for an env that fails.
@env_kernel
def discrete_action_fault(i, actions, _action_min, _action_max):
    """Env ``i``'s index when its single discrete action lies outside [min, max], else -1
    (the bounds are ints compiled into the launch)."""
    value = actions[i]
    return i if (value < _action_min) | (value > _action_max) else -1


@env_kernel
def discrete_rows_fault(i, _action_rows, _action_low, _action_high):
    """The flat index of env ``i``'s first action outside [low, high] (per column), else -1."""
    columns = _action_rows.shape[1]
    first = -1
    for c in range(columns - 1, -1, -1):  # backwards: the first bad column is written last
        value = _action_rows[i, c]
        first = i * columns + c if (value < _action_low[c]) | (value > _action_high[c]) else first
    return first


@env_kernel
def finite_action_fault(i, actions):
    """Env ``i``'s index when its single continuous action is NaN or infinite, else -1."""
    return -1 if math.isfinite(actions[i]) else i


@env_kernel
def finite_rows_fault(i, _action_rows):
    """The flat index of env ``i``'s first NaN or infinite action, else -1."""
    columns = _action_rows.shape[1]
    first = -1
    for c in range(columns - 1, -1, -1):
        first = first if math.isfinite(_action_rows[i, c]) else i * columns + c
    return first


@env_kernel
def keep_bad_action(i, actions, _action_fault_rows):
    """Keep a failing env's action: a deferred error shows it after the buffer moved on."""
    _action_fault_rows[i, 0] = actions[i]


@env_kernel
def keep_bad_action_rows(i, _action_rows, _action_fault_rows):
    """Keep a failing env's actions (several per env)."""
    for c in range(_action_rows.shape[1]):
        _action_fault_rows[i, c] = _action_rows[i, c]


class ActionLoader:
    """Hands the actions to the composed launch; owns the in-kernel value check.

    Parameters
    ----------
    space : gymnasium Space
        One agent's action space.
    actions : backend array
        The fixed action buffer, shape ``(num_envs, [num_agents,] *action_shape)``.
    backend : str
    mode : {"sync", "deferred"} or None
        When a bad value raises (see `check_mode`); None checks no values.

    Attributes
    ----------
    per_call : tuple of str
        The names the step launch takes at each call, in order (`arguments` returns them).
    precondition : kernelgym.core.binding.Precondition or None
        Heads every step program when values are checked.
    values : dict
        The check's values by name, for binding (templates of the per-call ones too).
    """

    def __init__(self, space, actions, backend, mode):
        self.space, self.backend, self.mode = space, backend, mode
        self._buffer = actions
        self.shape, self.dtype = tuple(actions.shape), np.dtype(actions.dtype)
        # the buffer's torch view and dtype, made when the first tensor arrives (`_bind_torch`):
        # a caller of numpy arrays never imports torch, which takes seconds
        self._buffer_t = self._torch_dtype = self.device = None
        self.discrete = isinstance(space, (spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary))
        # (num_envs, 1): the shape SB3 and skrl give Discrete batches, unambiguous for Discrete
        self._column_shape = (*self.shape, 1) if isinstance(space, spaces.Discrete) else None
        num_envs = self.shape[0]
        self._columns = int(np.prod(self.shape[1:], dtype=np.int64))
        # a cpu caller's array can go straight to the kernel; a device buffer takes a copy
        self._host_buffer = to_numpy(actions) if backend != "cuda" else None
        self._direct = backend == "cpu"
        self._device_copy = backend == "cuda"  # the buffer's torch view is the device memory itself
        # the action buffer's strides: a caller's array with these and its shape is C-contiguous
        self._strides = self._host_buffer.strides if self._direct else None
        self._fault = _backend_array(np.array([NO_FAULT], np.int64), backend)
        self._fault_rows = _backend_array(np.zeros((num_envs, self._columns), self.dtype), backend)
        # a check of several actions per env reads them as (num_envs, columns) rows
        self._rows = len(self.shape) > 1
        self.per_call = ("actions", "_action_rows") if self._rows else ("actions",)
        self.values = {"actions": actions, "_action_fault": self._fault, "_action_fault_rows": self._fault_rows}
        if self.discrete:
            low, high = _discrete_bounds(space)
            if self._rows:  # bounds per column, one copy per agent
                repeat = self._columns // low.shape[0]
                self.values["_action_low"] = _backend_array(np.tile(low, repeat), backend)
                self.values["_action_high"] = _backend_array(np.tile(high, repeat), backend)
            else:  # ints, compiled into the launch
                self.values["_action_min"], self.values["_action_max"] = int(low[0]), int(high[0])
            check = discrete_rows_fault if self._rows else discrete_action_fault
        else:
            check = finite_rows_fault if self._rows else finite_action_fault
        self.precondition = (
            None
            if mode is None
            else Precondition(check, "_action_fault", record=keep_bad_action_rows if self._rows else keep_bad_action)
        )
        self.layouts = {"_action_fault": "shared", "_action_low": "shared", "_action_high": "shared"}
        self._buffer_arguments = self._per_call_arguments(self._host_buffer if self._direct else actions)
        self.values.update(zip(self.per_call, self._buffer_arguments))

    # -------------------------------------------------------------- per call
    def arguments(self, actions) -> tuple:
        """The step launch's per-call values for ``actions`` (type, shape and dtype checked here).

        Raises
        ------
        TypeError, ValueError
            Bad type, shape, dtype or device (values are checked in the launch).
        """
        # the common cases first, each one test: an array exactly like the buffer (the
        # buffer's strides: its shape and C layout in one tuple comparison)
        if self._direct:
            # a plain memory copy into the buffer: users reading the data manager's actions
            # see what was stepped, and the launch reads the buffer it was bound to
            if type(actions) is np.ndarray:
                if actions.strides == self._strides and actions.shape == self.shape and actions.dtype == self.dtype:
                    self._host_buffer[...] = actions
                    return self._buffer_arguments
            elif _is_tensor(actions) and actions.dtype is self._bind_torch():
                try:  # a zero-copy view; refused for a tensor needing grad or off the cpu
                    array = actions.numpy()
                except (RuntimeError, TypeError):
                    array = None  # the general path below says what is wrong or copies
                if array is not None and array.strides == self._strides and array.shape == self.shape:
                    self._host_buffer[...] = array
                    return self._buffer_arguments
        elif (
            self._device_copy
            and _is_tensor(actions)
            and actions.dtype is self._bind_torch()
            and actions.shape == self.shape
            and actions.device == self.device
        ):  # a device tensor exactly like the buffer: one device copy, no further checks needed
            self._buffer_t.copy_(actions)
            return self._buffer_arguments
        if self._column_shape is not None and tuple(getattr(actions, "shape", ())) == self._column_shape:
            return self.arguments(actions.reshape(self.shape))
        self._check_type(actions)
        self._copy_into_buffer(actions)
        return self._buffer_arguments

    def _per_call_arguments(self, array) -> tuple:
        if not self._rows:
            return (array,)
        return array, (array if array.ndim == 2 else array.reshape(self.shape[0], self._columns))

    def _bind_torch(self):
        """The action buffer's torch dtype; its torch view and device made on the first call."""
        if self._torch_dtype is None:
            import torch

            self._buffer_t = to_torch(self._buffer)
            self._torch_dtype = self._buffer_t.dtype
            self.device = torch.device("cuda" if self.backend == "cuda" else "cpu")
        return self._torch_dtype

    def _check_type(self, actions) -> None:
        if is_torch_tensor(actions):
            self._bind_torch()
            if actions.device != self.device and not (actions.device.type == self.device.type == "cuda"):
                raise ValueError(f"actions: expected a tensor on {self.device}, got one on {actions.device}")
            dtype = _numpy_dtype(actions.dtype)
        elif isinstance(actions, np.ndarray):
            dtype = actions.dtype
        else:
            raise TypeError(f"actions: expected a torch.Tensor or numpy.ndarray, got {type(actions).__name__}")
        if tuple(actions.shape) != self.shape:
            raise ValueError(f"actions: expected shape {self.shape}, got {tuple(actions.shape)}")
        if self.discrete:
            if dtype is None or dtype.kind not in "iu":
                raise TypeError(f"actions: expected an integer dtype for {self.space}, got {actions.dtype}")
            if not np.can_cast(dtype, self.dtype, casting="safe"):
                self._check_cast(actions)
        elif dtype is None or dtype.kind not in "f":
            raise TypeError(f"actions: expected a float dtype for {self.space}, got {actions.dtype}")

    def _check_cast(self, actions) -> None:
        """Integer actions wider than the buffer (int64 into MultiBinary's int8): a value the buffer
        cannot hold would wrap into a valid one in the copy, so it is refused here, on the host."""
        values = np.asarray(actions.detach().cpu() if is_torch_tensor(actions) else actions)
        limits = np.iinfo(self.dtype)
        outside = np.flatnonzero((values < limits.min) | (values > limits.max))
        if outside.size:
            position = tuple(int(k) for k in np.unravel_index(outside[0], values.shape))
            raise ValueError(
                f"actions: expected values in {self.space}, got {values[position].item()!r} at index "
                f"{position} (outside {self.dtype}, the action buffer's dtype)"
            )

    def _copy_into_buffer(self, actions) -> None:
        """One copy (casting) into the fixed buffer: a device copy on cuda, no host round trip."""
        if self.backend == "cuda":
            self._bind_torch()
            self._buffer_t.copy_(to_torch(actions) if isinstance(actions, np.ndarray) else actions)
            return
        source = actions.detach().numpy() if is_torch_tensor(actions) else actions
        if self._host_buffer is not None and self._direct:
            with np.errstate(over="ignore", invalid="ignore"):  # an overflow is the value check's to report
                np.copyto(self._host_buffer, source, casting="unsafe")
        else:  # sim: the simulator's own host-to-device copy
            self._buffer.copy_to_device(np.ascontiguousarray(source, dtype=self.dtype))

    # ---------------------------------------------------------------- faults
    def raise_fault(self, actions=None) -> None:
        """Raise the recorded bad action, if any, and clear the record (a host read of one value).

        Parameters
        ----------
        actions : array, optional
            The step's actions, when still at hand: the message then shows the value as
            the caller passed it (before any cast into the buffer's dtype).
        """
        # on a device: read on torch's current stream, after the launches queued there
        code = int(self._fault[0]) if self.backend == "cpu" else int(streams.copy_to_host(self._fault)[0])
        if code == NO_FAULT:
            return
        self._clear_fault()
        position = tuple(int(k) for k in np.unravel_index(code, self.shape))
        if actions is not None:
            value = np.asarray(actions.detach().cpu() if is_torch_tensor(actions) else actions)[position]
        else:
            fault_rows = self._fault_rows if self.backend == "cpu" else streams.copy_to_host(self._fault_rows)
            value = fault_rows.reshape(-1)[code]
        value = value.item()
        if self.discrete:
            raise ValueError(f"actions: expected values in {self.space}, got {value!r} at index {position}")
        if isinstance(value, float) and math.isfinite(value):  # finite as given, infinite in the buffer
            raise ValueError(
                f"actions: got {value!r} at index {position}, which overflows {self.dtype} (the "
                f"action dtype; finite values up to {np.finfo(self.dtype).max:g} in magnitude)"
            )
        raise ValueError(f"actions: expected finite values, got {value!r} at index {position}")

    def _clear_fault(self) -> None:
        if self.backend == "cpu":
            self._fault[0] = NO_FAULT
        else:
            streams.copy_to_device(self._fault, np.array([NO_FAULT], np.int64))


def one_action(space, action, argument: str = "action") -> np.ndarray:
    """One env's (one agent's) ``action`` as an array of ``space``'s dtype and shape, checked as
    gymnasium's own envs check it, for the single-env adapters.

    ``Discrete``: an int (Python or numpy, or a 0-d integer array) in range; a float,
    even ``1.0``, is refused, as gymnasium's ``Discrete.contains`` refuses it.
    ``MultiDiscrete``/``MultiBinary``: the space's shape, integral values in range.
    ``Box``: the space's shape, finite real values that the space's dtype holds (no
    overflow to infinity); bounds are not enforced (gymnasium's envs clip).

    Raises
    ------
    TypeError
        A type or dtype the space refuses, named with ``argument``.
    ValueError
        A shape or a value the space refuses, named with ``argument``.
    """
    if isinstance(space, spaces.Discrete):
        if not (
            isinstance(action, (int, np.integer))
            or (isinstance(action, np.ndarray) and action.shape == () and action.dtype.kind in "iu")
        ):
            raise TypeError(f"{argument}: expected an int in {space}, got {type(action).__name__} {action!r}")
        value = int(action)
        if not space.start <= value < space.start + space.n:
            raise ValueError(f"{argument}: expected an int in {space}, got {value}")
        return np.array(value, space.dtype)
    try:
        array = np.asarray(action)
    except (TypeError, ValueError) as error:
        raise TypeError(f"{argument}: expected an array for {space}, got {type(action).__name__} ({error})") from None
    if array.shape != space.shape:
        raise ValueError(f"{argument}: expected shape {space.shape} for {space}, got {array.shape}")
    if array.dtype.kind not in "biuf":
        raise TypeError(f"{argument}: expected real numbers for {space}, got dtype {array.dtype}")
    if array.dtype.kind == "f" and not np.all(np.isfinite(array)):
        raise ValueError(f"{argument}: expected finite values, got {array[~np.isfinite(array)][0].item()!r}")
    if isinstance(space, (spaces.MultiDiscrete, spaces.MultiBinary)):
        if array.dtype.kind == "f" and np.any(array != np.floor(array)):
            raise ValueError(
                f"{argument}: expected integral values in {space}, got {array[array != np.floor(array)][0].item()!r}"
            )
        low, high = _discrete_bounds(space)
        flat = array.reshape(-1)
        outside = (flat < low) | (flat > high)
        if np.any(outside):
            raise ValueError(f"{argument}: expected values in {space}, got {flat[outside][0].item()!r}")
        return flat.astype(space.dtype).reshape(space.shape)
    return checked_cast(array, space.dtype, argument)


def _discrete_bounds(space):
    if isinstance(space, spaces.Discrete):
        low = np.array([space.start], dtype=np.int64)
        return low, low + space.n - 1
    if isinstance(space, spaces.MultiBinary):
        size = int(np.prod(space.shape))
        return np.zeros(size, np.int64), np.ones(size, np.int64)
    low = np.asarray(space.start, dtype=np.int64).reshape(-1)
    return low, low + np.asarray(space.nvec, dtype=np.int64).reshape(-1) - 1


def _backend_array(host: np.ndarray, backend: str):
    if backend == "cpu":
        return host
    from numba import cuda

    return cuda.to_device(host)


@functools.cache
def _numpy_dtype(torch_dtype):
    """numpy's twin of a torch dtype (cached: no tensor is made per step), or None."""
    import torch

    try:
        return np.dtype(torch.empty((), dtype=torch_dtype).numpy().dtype)
    except TypeError:  # bfloat16 and friends have no numpy twin
        return None


def _is_tensor(value) -> bool:
    """Whether ``value`` is exactly a torch tensor (no subclass), without importing torch: with
    torch not imported, nothing is one."""
    torch = sys.modules.get("torch")
    return torch is not None and type(value) is torch.Tensor
