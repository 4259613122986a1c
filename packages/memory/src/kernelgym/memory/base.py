"""``Memory``: circular buffers of shape (memory_size, num_envs, ...) on any torch device.

Cells are written in row-major order, ``cell = memory_index * num_envs + env_index``,
from a single linear write position. A batch of ``num_envs`` samples fills one row; a
smaller batch fills part of a row and one that reaches the end of a row continues on the
next. Cells that were never written are never returned by any sampling method.
"""

from __future__ import annotations

import datetime
import numbers
import os
import warnings
from collections.abc import Sequence

import numpy as np
import torch

from . import files
from .sequences import chronological_cells, episode_windows, sequence_cells
from .spaces import sample_shape

#: views of single rows are cached for memories up to this many rows (a view costs ~0.5 KB)
_ROW_VIEW_CACHE_ROWS = 8192


def _check_int(value, argument: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{argument}: expected an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{argument}: expected an int >= {minimum}, got {value}")
    return int(value)


class Memory:
    """Base class of the memories: circular buffers with two indexes (memory and env).

    Parameters
    ----------
    memory_size : int
        Rows of every tensor (time steps kept per environment).
    num_envs : int
        Parallel environments (columns).
    device : str or torch.device, optional
        Where tensors live; None picks ``"cuda:0"`` when available, else ``"cpu"``.
    export : bool
        Save the memory to a file every time it fills up.
    export_format : {"pt", "npz", "np", "csv"}
        Format of those files (``"np"`` is an alias of ``"npz"``).
    export_directory : str
        Folder under which ``memories/`` receives the exports ("" is the working directory).
    seed : int or torch.Generator, optional
        Seeds sampling: an int makes a generator on ``device``; a generator is used as is.
    episode_end_names : sequence of str
        Tensors that mark the end of an episode (e.g. ``terminated`` and ``truncated``).
        Sequences never cross a cell where one of those that exist is true.
    """

    def __init__(
        self,
        memory_size: int,
        num_envs: int = 1,
        device: str | torch.device | None = None,
        export: bool = False,
        export_format: str = "pt",
        export_directory: str = "",
        *,
        seed: int | torch.Generator | None = None,
        episode_end_names: Sequence[str] = ("terminated", "truncated"),
    ) -> None:
        self.memory_size = _check_int(memory_size, "memory_size")
        self.num_envs = _check_int(num_envs, "num_envs")
        if device is None:
            device = "cuda:0" if torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device: {device!r} was asked for, but torch sees no usable CUDA GPU")
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())  # tensors report an index
        files.file_extension(export_format, "export_format")
        self.export = bool(export)
        self.export_format = export_format
        self.export_directory = export_directory
        if isinstance(episode_end_names, str) or not all(isinstance(name, str) for name in episode_end_names):
            raise TypeError(f"episode_end_names: expected a sequence of tensor names, got {episode_end_names!r}")
        self.episode_end_names = tuple(episode_end_names)
        self.generator = self._make_generator(seed)

        self.tensors: dict[str, torch.Tensor] = {}
        self.tensors_view: dict[str, torch.Tensor] = {}
        self.tensors_keep_dimensions: dict[str, bool] = {}
        self.sampling_indexes: torch.Tensor | None = None

        self._capacity = self.memory_size * self.num_envs
        self._position = 0  # next cell to write, in [0, capacity)
        self._filled = False
        self._sample_shapes: dict[str, tuple[int, ...]] = {}
        self._full_row_specs: dict[str, tuple[torch.dtype, torch.Size]] = {}  # dtype, shape of one row
        self._row_views: dict[str, list[torch.Tensor]] = {}
        self._skipped_names: set[str] = set()
        self._arrays_handed_out = False
        self._tracks_writes = type(self)._on_written is not Memory._on_written  # subclass hook to call per add

    # -- indexes -----------------------------------------------------------------------------

    @property
    def memory_index(self) -> int:
        """Row that the next sample goes to."""
        return self._position // self.num_envs

    @property
    def env_index(self) -> int:
        """Column that the next sample goes to."""
        return self._position % self.num_envs

    @property
    def filled(self) -> bool:
        """True once every cell has been written (stays True after wrap-around until ``reset``)."""
        return self._filled

    def __len__(self) -> int:
        """Number of written cells: ``memory_size * num_envs`` once filled."""
        return self._capacity if self._filled else self._position

    def reset(self) -> None:
        """Forget what was written (indexes to 0, ``filled`` False); storage is kept in place."""
        self._position = 0
        self._filled = False

    # -- tensors -----------------------------------------------------------------------------

    def create_tensor(
        self,
        name: str,
        size,
        dtype: torch.dtype | None = None,
        keep_dimensions: bool = False,
    ) -> bool:
        """Create a tensor of shape (memory_size, num_envs, size).

        Parameters
        ----------
        name : str
            A Python identifier not starting with ``"__"`` (reserved for file metadata).
        size : int, tuple of int, or gymnasium space
            Elements per sample (see :func:`kernelgym.memory.spaces.sample_shape`).
        dtype : torch.dtype, optional
            Defaults to ``torch.get_default_dtype()``.
        keep_dimensions : bool
            Keep ``size`` as a shape instead of flattening it.

        Returns
        -------
        bool
            True if created, False if an identical tensor already existed.
        """
        self._check_name(name)
        if dtype is not None and not isinstance(dtype, torch.dtype):
            raise TypeError(f"dtype: expected a torch.dtype or None, got {dtype!r}")
        shape = sample_shape(size, keep_dimensions)
        dtype = torch.get_default_dtype() if dtype is None else dtype
        if name in self.tensors:
            existing = self.tensors[name]
            if self._sample_shapes[name] != shape or existing.dtype != dtype:
                raise ValueError(
                    f"name: tensor {name!r} exists as {existing.dtype} {self._sample_shapes[name]}, "
                    f"cannot recreate it as {dtype} {shape}"
                )
            return False
        tensor = torch.zeros((self.memory_size, self.num_envs, *shape), dtype=dtype, device=self.device)
        if dtype.is_floating_point or dtype.is_complex:
            tensor.fill_(float("nan"))  # unwritten cells are visible as NaN in raw access
        self._register(name, tensor, keep_dimensions)
        return True

    def attach_tensor(self, name: str, tensor: torch.Tensor, keep_dimensions: bool = True) -> None:
        """Use an existing tensor of shape (memory_size, num_envs, ...) as storage, without a copy.

        Whatever writes into ``tensor`` (a kernel, another library) writes into the memory;
        call :meth:`advance` after such writes so that the memory counts them.
        """
        self._check_name(name)
        if name in self.tensors:
            raise ValueError(f"name: tensor {name!r} already exists")
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"tensor: expected a torch.Tensor, got {type(tensor).__name__}")
        if tensor.dim() < 3 or tuple(tensor.shape[:2]) != (self.memory_size, self.num_envs):
            raise ValueError(
                f"tensor: expected shape ({self.memory_size}, {self.num_envs}, ...), got {tuple(tensor.shape)}"
            )
        if not tensor.is_contiguous():
            raise ValueError("tensor: expected a contiguous tensor (the memory needs flat views of it)")
        if tensor.device != self.device:
            raise ValueError(f"tensor: expected a tensor on {self.device}, got one on {tensor.device}")
        self._register(name, tensor, keep_dimensions)

    def _register(self, name: str, tensor: torch.Tensor, keep_dimensions: bool) -> None:
        shape = tuple(tensor.shape[2:])
        self.tensors[name] = tensor
        self.tensors_view[name] = tensor.view(self._capacity, *shape)
        self.tensors_keep_dimensions[name] = bool(keep_dimensions)
        self._sample_shapes[name] = shape
        self._full_row_specs[name] = (tensor.dtype, tensor.shape[1:])
        if self.memory_size <= _ROW_VIEW_CACHE_ROWS:
            self._row_views[name] = list(tensor.unbind(0))

    def _check_name(self, name) -> None:
        if not isinstance(name, str) or not name.isidentifier() or name.startswith("__"):
            raise ValueError(f"name: expected a Python identifier not starting with '__', got {name!r}")

    def get_tensor_names(self) -> tuple[str, ...]:
        """Names of the tensors, in alphabetical order."""
        return tuple(sorted(self.tensors))

    def _tensor(self, name: str, table: dict | None = None) -> torch.Tensor:
        try:
            return (self.tensors if table is None else table)[name]
        except (KeyError, TypeError):
            raise KeyError(f"name: no tensor {name!r} in memory; it has {list(self.get_tensor_names())}") from None

    def get_tensor_by_name(self, name: str, keepdim: bool = True) -> torch.Tensor:
        """The storage of a tensor (raw: unwritten cells included).

        ``keepdim=True`` gives shape (memory_size, num_envs, ...), else a view of shape
        (memory_size * num_envs, ...).
        """
        return self._tensor(name, self.tensors if keepdim else self.tensors_view)

    def set_tensor_by_name(self, name: str, tensor: torch.Tensor) -> None:
        """Overwrite a whole tensor in place (same dtype; shape with or without the env dim)."""
        target = self._tensor(name)
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"tensor: expected a torch.Tensor, got {type(tensor).__name__}")
        if tensor.dtype != target.dtype:
            raise TypeError(f"tensor: expected dtype {target.dtype} for {name!r}, got {tensor.dtype}")
        view = self.tensors_view[name]
        if tensor.shape in (target.shape, view.shape):
            with torch.no_grad():
                (target if tensor.shape == target.shape else view).copy_(tensor)
        else:
            raise ValueError(
                f"tensor: expected shape {tuple(target.shape)} or {tuple(view.shape)} for {name!r}, "
                f"got {tuple(tensor.shape)}"
            )

    def share_memory(self) -> None:
        """Move CPU tensors to shared memory so that other processes see the same storage."""
        if self._arrays_handed_out and any(not t.is_shared() for t in self.tensors.values() if t.device.type == "cpu"):
            # share_memory_ moves the storage: arrays from get_array_by_name would dangle
            raise RuntimeError("share_memory: call it before get_array_by_name (sharing moves CPU storage)")
        for tensor in self.tensors.values():
            if tensor.device.type == "cpu":
                tensor.share_memory_()

    # -- writing -----------------------------------------------------------------------------

    def add_samples(self, **tensors: torch.Tensor) -> None:
        """Record samples: one (data shape), or a batch of ``n`` (shape (n, data shape)).

        A batch of ``num_envs`` fills the current row and moves ``memory_index`` by one; a
        smaller batch moves ``env_index`` by ``n`` and continues on the next row when it
        reaches the end of one. Tensors of size 1 also accept a batch of shape (n,).
        Names the memory has no tensor for are skipped (with one warning per name).
        """
        if not tensors:
            raise ValueError("add_samples: expected tensors as keyword arguments (name=tensor), got none")
        names, values, count, skipped = [], [], None, None
        full_rows = self._full_row_specs
        for name, value in tensors.items():
            spec = full_rows.get(name)
            if spec is None:
                skipped = (skipped or []) + [name]
                continue
            # the common case (one full row of the right dtype, no autograd) costs three comparisons
            if (
                type(value) is torch.Tensor
                and value.dtype is spec[0]
                and value.shape == spec[1]
                and not value.requires_grad
            ):
                n = self.num_envs
            else:
                value, n = self._as_batch(name, value, self._sample_shapes[name])
            if count is None:
                count = n
            elif n != count:
                raise ValueError(f"add_samples: {name!r} has {n} samples, earlier tensors have {count}")
            names.append(name)
            values.append(value)
        if count is None:
            raise ValueError(
                f"add_samples: none of {list(tensors)} is a tensor of this memory {list(self.get_tensor_names())}"
            )
        if skipped:
            self._warn_skipped(skipped)
        self._write(names, values, count)

    def _warn_skipped(self, names: list[str]) -> None:
        for name in names:
            if name not in self._skipped_names:
                self._skipped_names.add(name)
                warnings.warn(f"add_samples: the memory has no tensor {name!r}; its samples are skipped", stacklevel=3)

    def _as_batch(self, name: str, value, shape: tuple[int, ...]) -> tuple[torch.Tensor, int]:
        if type(value) is not torch.Tensor:
            if isinstance(value, np.ndarray):
                value = torch.from_numpy(value)
            elif not isinstance(value, torch.Tensor):
                raise TypeError(
                    f"add_samples: {name!r} must be a torch.Tensor or numpy array, got {type(value).__name__}"
                )
        value = value.detach()  # storing must not graft the memory onto an autograd graph
        dtype = self.tensors[name].dtype
        if value.dtype != dtype:
            raise TypeError(f"add_samples: {name!r} must have dtype {dtype}, got {value.dtype}")
        value_shape = value.shape
        if value_shape == shape:
            return value.unsqueeze(0), 1
        if value_shape[1:] == shape:
            n = value_shape[0]
        elif shape == (1,) and len(value_shape) == 1:
            n, value = value_shape[0], value.unsqueeze(1)
        else:
            raise ValueError(
                f"add_samples: {name!r} must have shape {shape} or (n, *{shape}), got {tuple(value_shape)}"
            )
        if not 1 <= n <= self._capacity:
            raise ValueError(
                f"add_samples: {name!r} must hold 1 to {self._capacity} samples (memory_size * num_envs), got {n}"
            )
        return value, n

    def _write(self, names: list[str], values: list[torch.Tensor], count: int) -> None:
        position, num_envs = self._position, self.num_envs
        if count == num_envs and position % num_envs == 0 and self._row_views:
            row = position // num_envs  # the common case: one full row, through cached views
            row_views = self._row_views
            # one foreach call copies every tensor for about half the dispatch cost of a loop
            torch._foreach_copy_([row_views[name][row] for name in names], values)
            if position + count < self._capacity and not self._tracks_writes:
                self._position = position + count
            else:
                self._advance_by(count)
            return
        views = self.tensors_view
        first = min(count, self._capacity - position)
        torch._foreach_copy_([views[name][position : position + first] for name in names], [v[:first] for v in values])
        self._advance_by(first)
        if first < count:  # wrapped: the rest goes to the start, after any export
            rest = count - first
            torch._foreach_copy_([views[name][:rest] for name in names], [v[first:] for v in values])
            self._advance_by(rest)

    def advance(self, num_samples: int) -> None:
        """Count ``num_samples`` cells written in place from the write position.

        For memories whose storage is written directly (by a kernel through
        :meth:`get_array_by_name`, or through :meth:`attach_tensor`): write cells
        ``memory_index * num_envs + env_index`` onwards (row-major, wrapping), then call this.
        """
        num_samples = _check_int(num_samples, "num_samples")
        if num_samples > self._capacity:
            raise ValueError(
                f"num_samples: expected at most memory_size * num_envs = {self._capacity}, got {num_samples}"
            )
        first = min(num_samples, self._capacity - self._position)
        self._advance_by(first)
        if first < num_samples:
            self._advance_by(num_samples - first)

    def _advance_by(self, count: int) -> None:
        """Move the write position by ``count`` cells, at most to the end of the storage."""
        start = self._position
        self._on_written(start, count)
        end = start + count
        if end < self._capacity:
            self._position = end
            return
        self._position = 0
        self._filled = True
        if self.export:
            self.save(self.export_directory, self.export_format)

    def _on_written(self, start: int, count: int) -> None:
        """Hook for subclasses: cells ``start .. start + count - 1`` were just written."""

    # -- sampling ----------------------------------------------------------------------------

    def sample(self, names, batch_size: int, mini_batches: int = 1, sequence_length: int = 1, **kwargs):
        """Sample a batch; implemented by the subclasses (e.g. :class:`RandomMemory`)."""
        raise NotImplementedError(f"{type(self).__name__} does not sample; use RandomMemory or another subclass")

    def _views_for(self, names) -> list[torch.Tensor]:
        if isinstance(names, str) or not isinstance(names, Sequence):
            raise TypeError(f"names: expected a list or tuple of tensor names, got {names!r}")
        return [self._tensor(name, self.tensors_view) for name in names]

    def _check_sample_sizes(self, batch_size, mini_batches, sequence_length) -> tuple[int, int, int]:
        """Validated ``batch_size``, ``mini_batches`` (at most ``batch_size``) and ``sequence_length``."""
        batch_size = _check_int(batch_size, "batch_size")
        mini_batches = _check_int(mini_batches, "mini_batches")
        if mini_batches > batch_size:
            raise ValueError(f"mini_batches: expected at most batch_size={batch_size}, got {mini_batches}")
        return batch_size, mini_batches, _check_int(sequence_length, "sequence_length")

    def _check_not_empty(self) -> int:
        count = len(self)
        if count == 0:
            raise ValueError("memory is empty: add samples before sampling")
        return count

    def sample_by_index(self, names, indexes, mini_batches: int = 1) -> list[list[torch.Tensor]]:
        """Rows at the given flat indexes (``memory_index * num_envs + env_index``).

        Mini-batches split the indexes into ``mini_batches`` contiguous parts whose sizes
        differ by at most one (nothing is dropped).
        """
        views = self._views_for(names)
        mini_batches = _check_int(mini_batches, "mini_batches")
        indexes = torch.as_tensor(indexes, device=self.device)
        if (
            indexes.dtype.is_floating_point
            or indexes.dtype.is_complex
            or indexes.dtype == torch.bool
            or indexes.dim() != 1
        ):
            raise TypeError(
                f"indexes: expected a 1-d integer sequence, got {indexes.dtype} of shape {tuple(indexes.shape)}"
            )
        count = len(self)
        if indexes.numel():
            low, high = torch.aminmax(indexes)
            if int(low) < 0 or int(high) >= count:
                raise ValueError(
                    f"indexes: expected written cells in [0, {count}), got values in [{int(low)}, {int(high)}]"
                )
        if mini_batches > max(1, indexes.numel()):
            raise ValueError(f"mini_batches: expected at most {indexes.numel()} (one index each), got {mini_batches}")
        indexes = indexes.long()
        self.sampling_indexes = indexes
        return self._gather(views, indexes, mini_batches, 1)

    def _gather(
        self, views, indexes: torch.Tensor, mini_batches: int, sequence_length: int, extras=()
    ) -> list[list[torch.Tensor]]:
        """Rows at ``indexes``, split into mini-batches on sequence boundaries."""
        num_sequences = indexes.numel() // sequence_length
        quotient, remainder = divmod(num_sequences, mini_batches)
        sizes = [(quotient + 1) * sequence_length] * remainder + [quotient * sequence_length] * (
            mini_batches - remainder
        )
        columns = [torch.index_select(view, 0, indexes) for view in views] + list(extras)
        if mini_batches == 1:
            return [columns]
        return [list(batch) for batch in zip(*(column.split(sizes) for column in columns))]

    def sample_all(self, names, mini_batches: int = 1, sequence_length: int = 1, *, return_mask: bool = False):
        """All written rows, oldest first.

        With ``sequence_length > 1`` the rows are grouped environment by environment into
        windows of ``sequence_length`` steps that never cross an episode boundary (a short
        window is padded with its last row); ``return_mask=True`` appends the bool mask of
        real rows to each mini-batch. Mini-batches keep every row (sizes differ by at most
        one window).
        """
        views = self._views_for(names)
        mini_batches = _check_int(mini_batches, "mini_batches")
        sequence_length = _check_int(sequence_length, "sequence_length")
        count = self._check_not_empty()
        if sequence_length == 1:
            indexes = chronological_cells(
                position=self._position, count=count, capacity=self._capacity, device=self.device
            )
            valid = torch.ones(count, dtype=torch.bool, device=self.device)
        else:
            windows, valid = episode_windows(
                sequence_length,
                position=self._position,
                count=count,
                capacity=self._capacity,
                num_envs=self.num_envs,
                episode_ends=self._episode_ends(),
                device=self.device,
            )
            indexes, valid = windows.view(-1), valid.view(-1)
        if mini_batches > indexes.numel() // sequence_length:
            raise ValueError(
                f"mini_batches: expected at most {indexes.numel() // sequence_length} (the number of sequences), "
                f"got {mini_batches}"
            )
        self.sampling_indexes = indexes
        if sequence_length == 1 and not (self._filled and self._position):
            # written cells are a prefix of the storage: hand out views, no copy
            columns = [view[:count] for view in views] + ([valid] if return_mask else [])
            if mini_batches == 1:
                return [columns]
            return [list(batch) for batch in zip(*(column.tensor_split(mini_batches) for column in columns))]
        return self._gather(views, indexes, mini_batches, sequence_length, [valid] if return_mask else ())

    def _episode_ends(self):
        """Function mapping cells to "an episode ended here", or None without episode tensors."""
        views = [self.tensors_view[name] for name in self.episode_end_names if name in self.tensors_view]
        if not views:
            return None

        def ended(cells: torch.Tensor) -> torch.Tensor:
            flags = torch.zeros(cells.shape, dtype=torch.bool, device=cells.device)
            for view in views:
                values = torch.index_select(view, 0, cells.reshape(-1)).view(*cells.shape, *view.shape[1:])
                flags |= (values != 0).flatten(cells.dim()).any(-1)
            return flags

        return ended

    def _sequences(self, starts: torch.Tensor, first_step: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        return sequence_cells(
            starts,
            first_step,
            length,
            position=self._position,
            count=len(self),
            capacity=self._capacity,
            num_envs=self.num_envs,
            episode_ends=self._episode_ends(),
        )

    def get_sampling_indexes(self) -> torch.Tensor | None:
        """Flat indexes of the rows returned by the last sampling call, in the returned order."""
        return self.sampling_indexes

    def _make_generator(self, seed) -> torch.Generator | None:
        if seed is None or isinstance(seed, torch.Generator):
            if seed is not None and seed.device.type != self.device.type:
                raise ValueError(f"seed: expected a generator on {self.device.type}, got one on {seed.device}")
            return seed
        generator = torch.Generator(device=self.device)
        generator.manual_seed(_check_int(seed, "seed", minimum=0))
        return generator

    # -- files -------------------------------------------------------------------------------

    def save(self, directory: str = "", format: str = "pt") -> str:
        """Save to ``<directory>/memories/<time>_memory_<id>.<format>`` and return that path.

        Formats: ``"pt"`` (torch), ``"npz"`` (numpy; ``"np"`` is an alias), ``"csv"`` (the
        written rows, one line per cell). Every format restores the same memory with :meth:`load`.
        """
        extension = files.file_extension(format)
        directory = directory or self.export_directory
        folder = os.path.join(directory, "memories")
        os.makedirs(folder, exist_ok=True)
        stamp = datetime.datetime.now().strftime("%y-%m-%d_%H-%M-%S-%f")
        path = os.path.join(folder, f"{stamp}_memory_{hex(id(self))}.{extension}")
        files.write_snapshot(path, self._snapshot(), format)
        return path

    def _snapshot(self) -> files.Snapshot:
        names = self.get_tensor_names()
        return files.Snapshot(
            memory_size=self.memory_size,
            num_envs=self.num_envs,
            position=self._position,
            filled=self._filled,
            tensors={name: self.tensors[name].detach().cpu() for name in names},
            keep_dimensions={name: self.tensors_keep_dimensions[name] for name in names},
            extra=self._extra_state(),
        )

    def _extra_state(self) -> dict[str, torch.Tensor]:
        """Per-cell state a subclass saves with the tensors (shape (memory_size * num_envs, ...))."""
        return {}

    def load(self, path: str) -> None:
        """Restore tensors, indexes and ``filled`` from a file written by :meth:`save`.

        A memory without tensors takes the file's; one with tensors must match them
        (names, shapes, dtypes). Data is copied in place, so views and arrays of the
        storage stay valid. Nothing is changed unless the whole file is valid. Loading
        never runs code from the file.
        """
        snapshot = files.read_snapshot(path)
        if (snapshot.memory_size, snapshot.num_envs) != (self.memory_size, self.num_envs):
            raise ValueError(
                f"path: file holds memory_size={snapshot.memory_size}, num_envs={snapshot.num_envs}; "
                f"this memory has memory_size={self.memory_size}, num_envs={self.num_envs}"
            )
        if self.tensors:
            mine = {name: (t.dtype, tuple(t.shape)) for name, t in self.tensors.items()}
            theirs = {name: (t.dtype, tuple(t.shape)) for name, t in snapshot.tensors.items()}
            if mine != theirs:
                raise ValueError(f"path: file tensors {theirs} do not match this memory's {mine}")
        self._check_extra_state(snapshot.extra)
        for name, tensor in snapshot.tensors.items():
            if name in self.tensors:
                self.tensors[name].copy_(tensor)
            else:
                stored = torch.empty(tensor.shape, dtype=tensor.dtype, device=self.device)
                self._register(name, stored.copy_(tensor), snapshot.keep_dimensions[name])
        self._position, self._filled = snapshot.position, snapshot.filled
        self._load_extra_state(snapshot.extra)

    def _check_extra_state(self, extra: dict[str, torch.Tensor]) -> None:
        """Raise ValueError if a file's extra state cannot be loaded into this memory."""

    def _load_extra_state(self, extra: dict[str, torch.Tensor]) -> None:
        """Restore what :meth:`_extra_state` saved (called after indexes are restored)."""

    # -- storage for kernels -----------------------------------------------------------------

    def get_array_by_name(self, name: str, keepdim: bool = True):
        """The storage of a tensor as an array a Numba kernel can write, without a copy.

        CPU memories give a numpy array, CUDA memories a Numba device array (needs
        numba, e.g. ``pip install kernelgym-memory[core]``). Writes through the array are
        the memory's data; count them with :meth:`advance`. Call :meth:`share_memory`
        before this, never after (sharing moves CPU storage).
        """
        tensor = self.get_tensor_by_name(name, keepdim)
        self._arrays_handed_out = True
        if tensor.device.type == "cpu":
            try:
                return tensor.numpy()
            except TypeError as error:
                raise TypeError(f"name: tensor {name!r} has dtype {tensor.dtype}, which numpy cannot alias") from error
        if tensor.device.type == "cuda":
            try:
                from numba import cuda
            except ImportError as error:
                raise ImportError(
                    "get_array_by_name on a CUDA memory needs numba: pip install 'kernelgym-memory[core]'"
                ) from error
            return cuda.as_cuda_array(tensor)
        raise TypeError(f"name: no array type for tensors on {tensor.device}")

    @classmethod
    def from_data_manager(cls, data_manager, names: Sequence[str], memory_size: int, **kwargs) -> Memory:
        """A memory whose tensors are the data manager's arrays, shared without a copy.

        Each named array must have shape (memory_size, num_envs, ...): kernels launched
        with the data manager's arrays write the memory's storage directly; call
        :meth:`advance` after they wrote a step. ``kwargs`` go to the constructor
        (``device`` is taken from the arrays).
        """
        if isinstance(names, str) or not isinstance(names, Sequence) or not names:
            raise TypeError(f"names: expected a non-empty list of array names, got {names!r}")
        views = {name: _data_manager_tensor(data_manager, name) for name in names}
        num_envs = next(iter(views.values())).shape[1:2]
        for name, view in views.items():
            if view.dim() < 2 or view.shape[0] != memory_size or view.shape[1:2] != num_envs:
                raise ValueError(
                    f"names: array {name!r} must have shape (memory_size={memory_size}, num_envs, ...) "
                    f"like the others, got {tuple(view.shape)}"
                )
        memory = cls(memory_size, num_envs=num_envs[0], device=next(iter(views.values())).device, **kwargs)
        for name, view in views.items():
            if view.dim() == 2:  # one scalar per cell: expose it as size 1 (the seed's layout)
                view = view.unsqueeze(-1)
            memory.attach_tensor(name, view)
        return memory


def _data_manager_tensor(data_manager, name: str) -> torch.Tensor:
    """A torch view of a data manager's array (torch access if it offers one, else core's to_torch)."""
    if hasattr(data_manager, "is_data_on_device_via_torch") and data_manager.is_data_on_device_via_torch(name):
        return data_manager.data_on_device_via_torch(name)
    try:
        from kernelgym.core import to_torch
    except ImportError as error:
        raise ImportError("from_data_manager needs kernelgym-core: pip install 'kernelgym-memory[core]'") from error
    return to_torch(data_manager.device_data(name))
