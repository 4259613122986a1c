"""CUDADataManager: named arrays on the backend, their host copies, resets and logs.

Names and behaviour follow WarpDrive's ``CUDADataManager``, without its defects:

* resets happen in place: ``device_data(name)``, torch views and kernel arguments taken
  before ``reset_device`` or ``reset_done_envs`` stay valid (same buffer);
* no dtype is changed: float64 stays float64, int64 stays int64, bool stays bool;
* arrays may have any number of dims; per-env resets and logs copy bytes, so any dtype;
* bad input raises a TypeError, ValueError or KeyError naming the data, before anything
  is stored or any kernel runs;
* no code is generated into site-packages, and kernels are registered by name with
  `FunctionManager`, never found by magic names.

Host copies cost nothing for uniform data: an array pushed as one value broadcast over
its shape (``np.broadcast_to(0.0, shape)``) keeps that one value as the host copy
``reset_device`` restores, and reaches the device without a full-size host array.
Only data pushed with varying values keeps a full host copy.

Built-in per-env arrays (when ``num_envs`` is given): ``_done_`` (int32, 0 or 1) and
``_timestep_`` (int32), both torch accessible. An env's step kernel sets ``_done_[env]``
and advances ``_timestep_[env]``; `CUDADataManager.reset_done_envs` restores the
done envs on the device and clears both.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from kernelgym.core import builtin_kernels
from kernelgym.core.arrays import (
    allocation,
    byte_view,
    check_supported_dtype,
    copy_to_backend,
    is_uniform_view,
    require_torch,
    to_backend,
    to_torch,
)
from kernelgym.core.backends import resolve_backend
from kernelgym.core.binding import Branch, bind
from kernelgym.core.data_feed import DataFeed
from kernelgym.core.kernels import check_count

__all__ = ["CUDADataManager", "DONE", "TIMESTEP", "AT_RESET_SUFFIX", "FOR_LOG_SUFFIX"]

DONE = "_done_"
TIMESTEP = "_timestep_"
AT_RESET_SUFFIX = "_at_reset"
FOR_LOG_SUFFIX = "_for_log"
LAYOUTS = (None, "per_env", "per_agent")
_NUMERIC_KINDS = "biufc"
_META_TYPES = (bool, int, float, np.bool_, np.integer, np.floating)


@dataclass
class _Entry:
    host: np.ndarray  # read-only; the values reset_device restores (0-d for scalars)
    device: Any  # backend array (numpy, numba device array: no common type), or a numpy scalar by value
    is_scalar: bool
    torch_accessible: bool
    attributes: dict = field(default_factory=dict)
    tensor: object = None  # the torch view, made when first asked for (`data_on_device_via_torch`)


def _host_values(name: str, data) -> np.ndarray:
    """A read-only C-contiguous copy of ``data``, refusing anything a kernel cannot take.

    A uniform view (one value broadcast, `kernelgym.core.arrays.is_uniform_view`) stays
    one: its host copy is one element, whatever its shape.
    """
    try:
        with allocation(name, np.shape(data), getattr(data, "dtype", np.float64)):
            if isinstance(data, np.ndarray) and is_uniform_view(data):
                values = np.broadcast_to(np.array(data.flat[0], dtype=data.dtype), data.shape)
            else:
                values = np.array(data, order="C", copy=True)
    except ValueError as error:
        raise ValueError(f"{name}: cannot make an array of the data (ragged nested lists?): {error}") from None
    except TypeError as error:
        raise TypeError(f"{name}: cannot make a numpy array of a {type(data).__name__}: {error}") from None
    if values.dtype.kind not in _NUMERIC_KINDS:
        raise TypeError(
            f"{name}: expected numeric or bool data, got dtype {values.dtype}"
            + (" (ragged nested lists or Python objects)" if values.dtype == object else "")
        )
    check_supported_dtype(name, values.dtype)
    if values.flags.writeable:  # a broadcast view is read-only already
        values.flags.writeable = False
    return values


def _torch_installed() -> bool:
    return importlib.util.find_spec("torch") is not None


class CUDADataManager:
    """Named data on a backend (``cuda``, ``cpu`` or ``sim``) and its host copies.

    Parameters
    ----------
    num_agents, num_envs, episode_length : int, optional
        Also available as meta info (``num_agents``/``n_agents``, ``num_envs``/``n_envs``,
        ``episode_length``). ``num_envs`` is needed for per-env data, resets and logs.
    backend : {"cuda", "cpu", "sim", "auto"} or None
        See `resolve_backend`.

    Examples
    --------
    >>> dm = CUDADataManager(num_agents=1, num_envs=3, episode_length=10, backend="cpu")
    >>> feed = DataFeed()
    >>> feed.add_data(name="x", data=np.zeros((3, 2)), save_copy_and_apply_at_reset=True)
    >>> dm.push_data_to_device(feed, torch_accessible=True)
    >>> dm.get_shape("x"), dm.get_dtype("x")
    ((3, 2), dtype('float64'))
    """

    def __init__(self, num_agents=None, num_envs=None, episode_length=None, backend=None):
        self.backend = resolve_backend(backend)
        self.num_agents = None if num_agents is None else check_count("num_agents", num_agents, 1)
        self.num_envs = None if num_envs is None else check_count("num_envs", num_envs, 1)
        self.episode_length = None if episode_length is None else check_count("episode_length", episode_length, 1)
        self._data: dict[str, _Entry] = {}
        self._meta_info: dict = {}
        self._shared_constants: dict = {}
        self._shared_constants_on_device: dict = {}
        self._scalar_data_list: list[str] = []
        self._reset_data_list: list[str] = []
        self._log_data_list: list[str] = []
        self._reset_rows = None  # kernel arguments, built once after the last push
        self._reset_launch = None
        self._log_rows = None
        meta = {}
        for names, value in (
            (("num_agents", "n_agents"), self.num_agents),
            (("num_envs", "n_envs"), self.num_envs),
            (("episode_length",), self.episode_length),
        ):
            if value is not None:
                meta.update(dict.fromkeys(names, value))
        self.add_meta_info(meta)
        if self.num_envs is not None:
            # the built-in arrays (_done_, _timestep_) are where a huge num_envs first fails
            with allocation("num_envs", (2, self.num_envs), np.int32, where=self.backend):
                builtins = DataFeed()
                builtins.add_data(DONE, np.zeros(self.num_envs, np.int32), layout="per_env")
                builtins.add_data(TIMESTEP, np.zeros(self.num_envs, np.int32), layout="per_env")
                # torch views of the built-ins where torch is installed; core runs without it
                self.push_data_to_device(builtins, torch_accessible=_torch_installed())

    def __repr__(self):
        return (
            f"CUDADataManager(num_agents={self.num_agents}, num_envs={self.num_envs}, "
            f"episode_length={self.episode_length}, backend={self.backend!r}, data={list(self._data)})"
        )

    # -- names --------------------------------------------------------------------------

    def _check_new_name(self, name, pending=()) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"name: expected a non-empty str, got {type(name).__name__} {name!r}")
        for taken, what in (
            (self._data, "data on the device"),
            (self._meta_info, "meta info"),
            (self._shared_constants, "a shared constant"),
            (pending, "data pushed in the same call"),
        ):
            if name in taken:
                raise ValueError(f"{name}: already used as {what}; names must be unique")

    def _entry(self, name: str) -> _Entry:
        try:
            return self._data[name]
        except (KeyError, TypeError):
            raise KeyError(f"{name!r}: no such data on the device; known: {sorted(self._data)}") from None

    # -- meta info and shared constants ----------------------------------------------------

    def add_meta_info(self, meta: dict) -> None:
        """Add scalar meta information (int, float or bool), e.g. ``{"episode_length": 100}``.

        Adding an existing key again with the same value is allowed; a different value
        raises ``ValueError``.
        """
        if not isinstance(meta, dict):
            raise TypeError(f"meta: expected a dict, got {type(meta).__name__}")
        for name, value in meta.items():
            if not isinstance(value, _META_TYPES):
                raise TypeError(f"{name}: meta info must be an int, float or bool scalar, got {type(value).__name__}")
            if name in self._meta_info:
                if self._meta_info[name] != value:
                    raise ValueError(
                        f"{name}: meta info is already {self._meta_info[name]!r}, cannot set it to {value!r}"
                    )
                continue
            self._check_new_name(name)
        self._meta_info.update(meta)

    def meta_info(self, name: str):
        """The meta value ``name``."""
        if name not in self._meta_info:
            raise KeyError(f"{name!r}: no such meta info; known: {sorted(self._meta_info)}")
        return self._meta_info[name]

    def add_shared_constants(self, constants: dict) -> None:
        """Add constants shared by every env, e.g. ``{"action_mapping": [[0, 0], [1, 1]]}``.

        Arrays are copied to the backend once (kernels get the device copy through
        `FunctionManager` names); scalars are passed by value. dtypes are kept.
        """
        if not isinstance(constants, dict):
            raise TypeError(f"constants: expected a dict, got {type(constants).__name__}")
        prepared: dict[str, np.ndarray] = {}
        for name, value in constants.items():
            self._check_new_name(name, prepared)
            prepared[name] = _host_values(name, value)
        for name, values in prepared.items():
            self._shared_constants[name] = values[()] if values.ndim == 0 else values
            self._shared_constants_on_device[name] = (
                values[()] if values.ndim == 0 else to_backend(values, self.backend)
            )

    def shared_constant(self, name: str):
        """The host value of shared constant ``name`` (read-only)."""
        if name not in self._shared_constants:
            raise KeyError(f"{name!r}: no such shared constant; known: {sorted(self._shared_constants)}")
        return self._shared_constants[name]

    # -- pushing data ---------------------------------------------------------------------

    def _prepare(self, name: str, content, pending) -> tuple[np.ndarray, dict]:
        self._check_new_name(name, pending)
        if not isinstance(content, dict) or "data" not in content:
            raise TypeError(f"{name}: expected {{'data': ..., 'attributes': {{...}}}} (see DataFeed), got {content!r}")
        attributes = dict(content.get("attributes") or {})
        values = _host_values(name, content["data"])
        layout = attributes.get("layout")
        if layout not in LAYOUTS:
            raise ValueError(f"{name}: layout must be one of {LAYOUTS}, got {layout!r}")
        resets = bool(attributes.get("save_copy_and_apply_at_reset", False))
        logs = bool(attributes.get("log_data_across_episode", False))
        per_env = layout is not None or resets or logs
        if per_env:
            why = (
                f"layout={layout!r}"
                if layout
                else "save_copy_and_apply_at_reset"
                if resets
                else "log_data_across_episode"
            )
            if self.num_envs is None:
                raise ValueError(f"{name}: {why} needs the data manager's num_envs, which is None")
            if values.ndim == 0 or values.shape[0] != self.num_envs:
                raise ValueError(
                    f"{name}: {why} needs the leading dim to be num_envs={self.num_envs}, got shape {values.shape}"
                )
        if layout == "per_agent":
            if self.num_agents is None:
                raise ValueError(f"{name}: layout='per_agent' needs the data manager's num_agents, which is None")
            if values.ndim < 2 or values.shape[1] != self.num_agents:
                raise ValueError(
                    f"{name}: layout='per_agent' needs the leading dims to be (num_envs, num_agents)="
                    f"({self.num_envs}, {self.num_agents}), got shape {values.shape}"
                )
        if logs and self.episode_length is None:
            raise ValueError(f"{name}: log_data_across_episode needs the data manager's episode_length, which is None")
        # the derived device arrays need free names too
        for wanted, suffix in ((resets, AT_RESET_SUFFIX), (logs, FOR_LOG_SUFFIX)):
            if wanted:
                self._check_new_name(name + suffix, pending)
                pending[name + suffix] = None
        return values, attributes

    def push_data_to_device(self, data: dict, torch_accessible: bool = False) -> None:
        """Register named data and copy it to the backend.

        Parameters
        ----------
        data : DataFeed or dict
            ``{name: {"data": array_or_scalar, "attributes": {...}}}``. Arrays are copied
            to the backend with their dtype unchanged; scalars are kept on the host and
            passed to kernels by value. ``save_copy_and_apply_at_reset`` also stores a
            device copy ``<name>_at_reset``; ``log_data_across_episode`` a zeroed device
            buffer ``<name>_for_log`` of shape ``(episode_length + 1, *shape)``.
        torch_accessible : bool
            Also make the arrays (and their logs) available as torch tensors that alias
            them: `data_on_device_via_torch`.

        Every entry is checked before any is stored: a bad one raises (naming it) and
        leaves the data manager as it was.
        """
        if not isinstance(data, dict):
            raise TypeError(f"data: expected a DataFeed or dict, got {type(data).__name__}")
        pending: dict = {}
        prepared = {}
        for name, content in data.items():
            values, attributes = self._prepare(name, content, pending)
            pending[name] = None
            prepared[name] = (values, attributes)
            if torch_accessible and values.ndim == 0:
                raise ValueError(
                    f"{name}: a scalar is passed to kernels by value and cannot be torch accessible; "
                    "push it as a 1-element array, or without torch_accessible"
                )
        if torch_accessible:
            require_torch("push_data_to_device(..., torch_accessible=True)")  # before anything is stored

        # Allocate everything (device arrays, reset copies, logs, torch views) before
        # storing anything: an allocation that fails leaves the data manager unchanged.
        entries = {}
        for name, (values, attributes) in prepared.items():
            if values.ndim == 0:
                entries[name] = _Entry(values, values[()], True, False, attributes)
                continue
            entries[name] = self._new_entry(name, values, torch_accessible, attributes)
            if attributes.get("save_copy_and_apply_at_reset"):
                entries[name + AT_RESET_SUFFIX] = self._new_entry(
                    name + AT_RESET_SUFFIX, values, torch_accessible, {"copy_of": name}
                )
            if attributes.get("log_data_across_episode"):
                log_shape = (self.episode_length + 1, *values.shape)
                with allocation(name + FOR_LOG_SUFFIX, log_shape, values.dtype, where=self.backend):
                    log = np.broadcast_to(np.zeros((), values.dtype), log_shape)  # uniform: no host copy
                entries[name + FOR_LOG_SUFFIX] = self._new_entry(
                    name + FOR_LOG_SUFFIX, log, torch_accessible, {"log_of": name}
                )
        self._data.update(entries)
        for name, (values, attributes) in prepared.items():
            if values.ndim == 0:
                self._scalar_data_list.append(name)
            if attributes.get("save_copy_and_apply_at_reset"):
                self._reset_data_list.append(name)
            if attributes.get("log_data_across_episode"):
                self._log_data_list.append(name)
        self._reset_rows = self._reset_launch = None
        self._log_rows = None

    def _new_entry(self, name: str, values: np.ndarray, torch_accessible: bool, attributes: dict) -> _Entry:
        with allocation(name, values.shape, values.dtype, where=self.backend):
            device = to_backend(values, self.backend)
        return _Entry(values, device, False, torch_accessible, attributes)

    # -- reading data ---------------------------------------------------------------------

    def device_data(self, name: str):
        """The backend array ``name`` (numpy on cpu, numba device array on cuda/sim),
        or the scalar value for scalar data. The same object for the manager's lifetime."""
        return self._entry(name).device

    def data_on_device_via_torch(self, name: str):
        """A torch tensor aliasing the device array ``name`` (pushed with torch_accessible=True).

        Writes through it change the device array; it stays valid across resets. Copy
        it to keep values. To fetch a host copy call `pull_data_from_device`.
        """
        entry = self._entry(name)
        if not entry.torch_accessible:
            raise ValueError(f"{name}: not torch accessible; push it with torch_accessible=True")
        if entry.tensor is None:  # made once, on first request: torch's import takes seconds
            entry.tensor = to_torch(entry.device)
        return entry.tensor

    def pull_data_from_device(self, name: str):
        """A host copy of the device array ``name`` (numpy), or the scalar value."""
        entry = self._entry(name)
        if entry.is_scalar:
            return entry.device
        if isinstance(entry.device, np.ndarray):
            return entry.device.copy()
        return entry.device.copy_to_host()

    def is_data_on_device(self, name: str) -> bool:
        """Whether ``name`` was pushed (arrays live on the device; scalars go by value)."""
        return name in self._data

    def is_data_on_device_via_torch(self, name: str) -> bool:
        """Whether ``name`` exists and is accessible as a torch tensor."""
        return name in self._data and self._data[name].torch_accessible

    def get_dtype(self, name: str) -> np.dtype:
        """The numpy dtype of ``name`` (as pushed: never changed)."""
        return self._entry(name).host.dtype

    def get_shape(self, name: str) -> tuple:
        """The shape of ``name`` (``()`` for scalars)."""
        return self._entry(name).host.shape

    def kernel_argument(self, name: str):
        """What a kernel receives for ``name``: device data, a meta value or a shared constant."""
        if name in self._data:
            return self._data[name].device
        if name in self._meta_info:
            return self._meta_info[name]
        if name in self._shared_constants_on_device:
            return self._shared_constants_on_device[name]
        raise KeyError(
            f"{name!r}: not data, meta info or a shared constant of this data manager; known: "
            f"{sorted([*self._data, *self._meta_info, *self._shared_constants])}"
        )

    @property
    def host_data(self):
        """Read-only mapping of name to the host values pushed (what reset_device restores)."""
        return MappingProxyType({name: entry.host for name, entry in self._data.items()})

    @property
    def scalar_data_list(self) -> list:
        """Names of scalar data (passed to kernels by value)."""
        return list(self._scalar_data_list)

    @property
    def reset_data_list(self) -> list:
        """Names of data with ``save_copy_and_apply_at_reset``."""
        return list(self._reset_data_list)

    @property
    def log_data_list(self) -> list:
        """Names of data with ``log_data_across_episode``."""
        return list(self._log_data_list)

    # -- resets and logs ------------------------------------------------------------------

    def reset_device(self, name: str | None = None) -> None:
        """Copy the host values back into device array ``name`` (every array if None).

        In place: device arrays, torch views and kernel arguments stay valid. This is a
        host-to-device transfer; `reset_done_envs` resets on the device instead.
        """
        entries = [self._entry(name)] if name is not None else list(self._data.values())
        for entry in entries:
            if entry.is_scalar:
                continue
            copy_to_backend(entry.device, entry.host)

    def _rows(self, names, leading_shape) -> tuple:
        """Raw views of ``names``: (uint64 views, uint8 views), each a non-empty tuple."""
        groups: tuple[list, list] = ([], [])
        for name in names:
            device = self._data[name].device
            row_bytes = device.nbytes // int(np.prod(leading_shape))
            wide = row_bytes % 8 == 0
            groups[0 if wide else 1].append(byte_view(device, leading_shape, np.uint64 if wide else np.uint8))
        # an empty tuple has no element type for the kernel: pad with a zero-width array
        return tuple(
            tuple(group) or (to_backend(np.zeros((*leading_shape, 0), unit), self.backend),)
            for group, unit in zip(groups, (np.uint64, np.uint8))
        )

    def _require(self, what: str, **needed) -> None:
        for name, value in needed.items():
            if value is None:
                raise ValueError(f"{what} needs the data manager's {name}, which is None")

    def reset_done_envs(self) -> None:
        """Reset, on the device, every env whose ``_done_`` is set, in one launch.

        For each done env: every ``save_copy_and_apply_at_reset`` array gets its saved
        row (``<name>_at_reset``) back, whatever its dtype and number of dims, and
        ``_done_`` and ``_timestep_`` are cleared. Other envs are untouched. No host
        transfer, no synchronization on cuda.
        """
        self._require("reset_done_envs", num_envs=self.num_envs)
        if self._reset_launch is None:
            self._reset_launch = bind(
                Branch(DONE, then=[builtin_kernels.restore_saved_rows, builtin_kernels.clear_episode]),
                {**self.reset_rows(), DONE: self._data[DONE].device, TIMESTEP: self._data[TIMESTEP].device},
                backend=self.backend,
                num_envs=self.num_envs,
            )
        self._reset_launch()

    def reset_rows(self) -> dict:
        """The raw row views `builtin_kernels.restore_saved_rows` binds, by its parameter names.

        ``reset_live_words``/``reset_saved_words`` (uint64 views of the arrays whose rows
        are a multiple of 8 bytes) and ``reset_live_bytes``/``reset_saved_bytes`` (uint8
        views of the others) of every ``save_copy_and_apply_at_reset`` array and its
        saved copy: the one way to restore envs, for runtimes that compose it into
        their own reset launch. Built once after the last push.
        """
        self._require("reset_rows", num_envs=self.num_envs)
        if self._reset_rows is None:
            names = self._reset_data_list
            live_words, live_bytes = self._rows(names, (self.num_envs,))
            saved_words, saved_bytes = self._rows([name + AT_RESET_SUFFIX for name in names], (self.num_envs,))
            self._reset_rows = {
                "reset_live_words": live_words,
                "reset_saved_words": saved_words,
                "reset_live_bytes": live_bytes,
                "reset_saved_bytes": saved_bytes,
            }
        return self._reset_rows

    def log_step(self) -> None:
        """Write the current values of every logged array into their episode logs.

        Env ``e`` writes row ``_timestep_[e]`` of ``<name>_for_log`` (shape
        ``(episode_length + 1, num_envs, ...)``); timesteps outside ``0..episode_length``
        are not logged. Call it after each step (and after a reset, for row 0). One launch.
        """
        self._require("log_step", num_envs=self.num_envs, episode_length=self.episode_length)
        if not self._log_data_list:
            return
        if self._log_rows is None:
            names = self._log_data_list
            live_words, live_bytes = self._rows(names, (self.num_envs,))
            log_words, log_bytes = self._rows(
                [name + FOR_LOG_SUFFIX for name in names], (self.episode_length + 1, self.num_envs)
            )
            self._log_rows = (live_words, log_words, live_bytes, log_bytes)
        builtin_kernels.log_step.launch(
            self.backend, self.num_envs, self._data[TIMESTEP].device, self.episode_length, *self._log_rows
        )
