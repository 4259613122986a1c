"""Tensors of shape (memory_size, num_envs, ...) and the write position: what a memory holds."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from .spaces import sample_shape
from .validation import check_tensor_name

if TYPE_CHECKING:
    from ._state import MemoryState as _MixinBase
else:
    _MixinBase = object  # the Protocol types the mixin; at run time it is a plain class

#: views of single rows are cached for memories up to this many rows (a view costs ~0.5 KB)
_ROW_VIEW_CACHE_ROWS = 8192


class TensorStorage(_MixinBase):
    """Mixin of `Memory`: its tensors, indexes and ``filled`` flag.

    Cells are numbered row-major, ``cell = memory_index * num_envs + env_index``; the
    next cell to write is ``self._position`` and ``self._capacity`` is the number of cells.
    """

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
        with self._lock:
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
            A Python identifier not starting with `"__"` (reserved for file metadata).
        size : int, tuple of int, gymnasium space or None
            Elements per sample (see [`sample_shape`][kernelgym.memory.spaces.sample_shape]).
            None creates no tensor, as skrl's memory does (its agents pass `state_space=None`):
            `add_samples` then skips that name and the sampling methods return None for it.
        dtype : torch.dtype, optional
            Defaults to `torch.get_default_dtype()`.
        keep_dimensions : bool
            Keep `size` as a shape instead of flattening it.

        Returns
        -------
        bool
            True if created, False if an identical tensor already existed or `size` is None.
        """
        check_tensor_name(name)
        if size is None:
            if name not in self.tensors:
                self._absent_names.add(name)
            return False
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

    def _register(self, name: str, tensor: torch.Tensor, keep_dimensions: bool) -> None:
        shape = tuple(tensor.shape[2:])
        with self._lock:
            self._absent_names.discard(name)  # a real tensor replaces a `size=None` one
            self.tensors[name] = tensor
            self.tensors_view[name] = tensor.view(self._capacity, *shape)
            self.tensors_keep_dimensions[name] = bool(keep_dimensions)
            self._sample_shapes[name] = shape
            self._full_row_specs[name] = (tensor.dtype, tensor.shape[1:])
            if self.memory_size <= _ROW_VIEW_CACHE_ROWS:
                self._row_views[name] = list(tensor.unbind(0))

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
        if tensor.shape not in (target.shape, view.shape):
            raise ValueError(
                f"tensor: expected shape {tuple(target.shape)} or {tuple(view.shape)} for {name!r}, "
                f"got {tuple(tensor.shape)}"
            )
        with self._lock, torch.no_grad():
            (target if tensor.shape == target.shape else view).copy_(tensor)

    def share_memory(self) -> None:
        """Move CPU tensors to shared memory so that other processes see the same storage.

        Refused (RuntimeError naming the tensor, nothing moved) for a CPU tensor adopted with
        `attach_tensor` or `from_data_manager` that is not shared already: its
        owner (a numpy array, a data manager) writes the old storage, so after a move the
        memory would never see those writes. Attach a tensor that is shared already instead.
        """
        for name in sorted(self._attached_names):
            tensor = self.tensors[name]
            if tensor.device.type == "cpu" and not tensor.is_shared():
                raise RuntimeError(
                    f"share_memory: tensor {name!r} is attached storage (attach_tensor or from_data_manager) that "
                    "its owner writes; sharing would move it to new memory, and the owner's writes (e.g. kernels "
                    "launched with the data manager's arrays) would no longer reach the memory. Attach a tensor "
                    "that is already in shared memory (tensor.share_memory_() before attach_tensor) instead"
                )
        if self._arrays_handed_out and any(not t.is_shared() for t in self.tensors.values() if t.device.type == "cpu"):
            # share_memory_ moves the storage: arrays from get_array_by_name would dangle
            raise RuntimeError("share_memory: call it before get_array_by_name (sharing moves CPU storage)")
        for tensor in self.tensors.values():
            if tensor.device.type == "cpu":
                tensor.share_memory_()
