"""``save`` and ``load``: a memory to and from a file (formats in `kernelgym.memory.files`)."""

from __future__ import annotations

import datetime
import os
from typing import TYPE_CHECKING

import torch

from . import files

if TYPE_CHECKING:
    from ._state import MemoryState as _MixinBase
else:
    _MixinBase = object  # the Protocol types the mixin; at run time it is a plain class


class Persistence(_MixinBase):
    """Mixin of `Memory`: consistent snapshots to files, all-or-nothing loads.

    `save` copies the storage under the memory's lock (adds wait for the copy, not
    for the file), so a file never holds half of an add made by another thread.
    """

    def save(self, directory: str = "", format: str = "pt") -> str:
        """Save to ``<directory>/memories/<time>_memory_<id>.<format>`` and return that path.

        Formats: ``"pt"`` (torch), ``"npz"`` (numpy; ``"np"`` is an alias), ``"csv"`` (the
        written rows, one line per cell). Every format restores the same memory with
        `load`, bit for bit, and carries SHA-256 digests that `load` verifies.
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
        """A copy of the memory's state, taken under the lock (never the live storage)."""
        with self._lock:
            names = self.get_tensor_names()
            return files.Snapshot(
                memory_size=self.memory_size,
                num_envs=self.num_envs,
                position=self._position,
                filled=self._filled,
                tensors={name: self.tensors[name].detach().to("cpu", copy=True) for name in names},
                keep_dimensions={name: self.tensors_keep_dimensions[name] for name in names},
                extra=self._extra_state(),
            )

    def _extra_state(self) -> dict[str, torch.Tensor]:
        """Per-cell state a subclass saves with the tensors (CPU copies of shape (memory_size * num_envs, ...))."""
        return {}

    def load(self, path: str) -> None:
        """Restore tensors, indexes and ``filled`` from a file written by `save`.

        A memory without tensors takes the file's; one with tensors must match them
        (names, shapes, dtypes). Data is copied in place, so views and arrays of the
        storage stay valid. Nothing is changed unless the whole file is valid (its
        digests included). Loading never runs code from the file.
        """
        snapshot = files.read_snapshot(path, self.memory_size, self.num_envs)
        with self._lock:
            if self.tensors:
                mine = {name: (t.dtype, tuple(t.shape)) for name, t in self.tensors.items()}
                theirs = {name: (t.dtype, tuple(t.shape)) for name, t in snapshot.tensors.items()}
                if mine != theirs:
                    raise ValueError(f"path: file tensors {theirs} do not match this memory's {mine}")
            self._check_extra_state(snapshot)
            for name, tensor in snapshot.tensors.items():
                if name in self.tensors:
                    self.tensors[name].copy_(tensor)
                else:
                    stored = torch.empty(tensor.shape, dtype=tensor.dtype, device=self.device)
                    self._register(name, stored.copy_(tensor), snapshot.keep_dimensions[name])
            self._position, self._filled = snapshot.position, snapshot.filled
            self._load_extra_state(snapshot.extra)

    def _check_extra_state(self, snapshot: files.Snapshot) -> None:
        """Raise ValueError if a file's extra state cannot be loaded into this memory."""

    def _load_extra_state(self, extra: dict[str, torch.Tensor]) -> None:
        """Restore what `_extra_state` saved (called after indexes are restored)."""
