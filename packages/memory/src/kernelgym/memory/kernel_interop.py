"""Storage that kernels and other libraries write directly, without a copy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import torch

from .validation import check_int, check_tensor_name

if TYPE_CHECKING:
    from ._state import MemoryState as _MixinBase
    from .base import Memory
else:
    _MixinBase = object  # the Protocol types the mixin; at run time it is a plain class


class KernelInterop(_MixinBase):
    """Mixin of `Memory`: hand out or adopt storage, count writes made through it."""

    def attach_tensor(self, name: str, tensor: torch.Tensor, keep_dimensions: bool = True) -> None:
        """Use an existing tensor of shape (memory_size, num_envs, ...) as storage, without a copy.

        Whatever writes into ``tensor`` (a kernel, another library) writes into the memory;
        call `advance` after such writes so that the memory counts them. A CPU
        tensor must already be in shared memory if `share_memory` is to be called.
        """
        check_tensor_name(name)
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
        self._attached_names.add(name)

    def advance(self, num_samples: int) -> None:
        """Count ``num_samples`` cells written in place from the write position.

        For memories whose storage is written directly (by a kernel through
        `get_array_by_name`, or through `attach_tensor`): write cells
        ``memory_index * num_envs + env_index`` onwards (row-major, wrapping), then call this.
        If the call raises (e.g. a failing export), the indexes are unchanged.
        """
        num_samples = check_int(num_samples, "num_samples")
        if num_samples > self._capacity:
            raise ValueError(
                f"num_samples: expected at most memory_size * num_envs = {self._capacity}, got {num_samples}"
            )
        with self._lock:
            if self.export and self._position + num_samples >= self._capacity:
                self._fill_and_export(num_samples, lambda offset, start, length: None)  # the data is there already
                return
            first = min(num_samples, self._capacity - self._position)
            self._advance_by(first)
            if first < num_samples:
                self._advance_by(num_samples - first)

    def get_array_by_name(self, name: str, keepdim: bool = True):
        """The storage of a tensor as an array a Numba kernel can write, without a copy.

        CPU memories give a numpy array, CUDA memories a Numba device array (needs
        numba, e.g. ``pip install kernelgym-memory[core]``). Writes through the array are
        the memory's data; count them with `advance`. Call `share_memory`
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
        `advance` after they wrote a step. ``kwargs`` go to the constructor
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
        # a classmethod of the mixin, called on Memory and its subclasses only
        memory = cast("type[Memory]", cls)(
            memory_size, num_envs=num_envs[0], device=next(iter(views.values())).device, **kwargs
        )
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
