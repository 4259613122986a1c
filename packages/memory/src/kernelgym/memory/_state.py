"""The state that `Memory`'s mixins share, as a Protocol for type checkers.

``Memory.__init__`` sets these attributes and each mixin implements some of these methods; the
mixins use one another's. Each mixin derives from `MemoryState` only while type checking,
so at run time nothing changes (no Protocol in the MRO).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Protocol

import torch


class MemoryState(Protocol):
    """Attributes and methods that one mixin of ``Memory`` reads from another."""

    memory_size: int
    num_envs: int
    device: torch.device
    export: bool
    export_format: str
    export_directory: str
    tensors: dict[str, torch.Tensor]
    tensors_view: dict[str, torch.Tensor]
    tensors_keep_dimensions: dict[str, bool]
    _capacity: int
    _position: int
    _filled: bool
    _sample_shapes: dict[str, tuple[int, ...]]
    _full_row_specs: dict[str, tuple[torch.dtype, torch.Size]]
    _row_views: dict[str, list[torch.Tensor]]
    _skipped_names: set[str]
    _absent_names: set[str]
    _arrays_handed_out: bool
    _attached_names: set[str]
    _lock: threading.RLock
    _tracks_writes: bool

    def __len__(self) -> int: ...

    def get_tensor_names(self) -> tuple[str, ...]: ...

    def get_tensor_by_name(self, name: str, keepdim: bool = True) -> torch.Tensor: ...

    def _tensor(self, name: str, table: dict | None = None) -> torch.Tensor: ...

    def _register(self, name: str, tensor: torch.Tensor, keep_dimensions: bool) -> None: ...

    def _advance_by(self, count: int) -> None: ...

    def _fill_and_export(
        self, count: int, store: Callable[[int, int, int], None], written: Sequence[torch.Tensor] = ...
    ) -> None: ...

    def save(self, directory: str = "", format: str = "pt") -> str: ...
