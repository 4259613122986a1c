"""Writing samples: ``add_samples`` and the move of the write position, atomic with exports."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch

if TYPE_CHECKING:
    from ._state import MemoryState as _MixinBase
else:
    _MixinBase = object  # the Protocol types the mixin; at run time it is a plain class


def exact_cast(value: torch.Tensor, dtype: torch.dtype, name: str) -> torch.Tensor:
    """`value` cast to `dtype` when every element survives the round trip back unchanged.

    skrl's memory stores through `copy_`, which casts silently (int64 actions into float32);
    an exact cast is stored the same way, a lossy one (2**24 + 1 into float32, 0.5 into an
    int, 2 into a bool, 0.1 float64 into float32) is refused with the first value it changes.
    """
    cast = value.to(dtype)
    same = cast.to(value.dtype) == value
    if value.dtype.is_floating_point or value.dtype.is_complex:
        same |= torch.isnan(value) & torch.isnan(cast.to(value.dtype))  # NaN stays NaN in a float
    if not bool(same.all()):
        bad = value[~same].flatten()[0].item()
        raise TypeError(
            f"add_samples: {name!r} holds {dtype}; {bad!r} ({value.dtype}) is not exactly representable in it "
            f"(only exact casts are stored)"
        )
    return cast


class SampleWriter(_MixinBase):
    """Mixin of `Memory`: records samples and counts written cells.

    A write either completes or changes nothing: every argument is checked before the
    first cell is written, and an export that fails when the memory fills (``export=True``)
    puts back the overwritten cells, the indexes and any subclass state of those cells.
    Writes hold the memory's lock, so a `save` in another thread never sees half of one.
    """

    # the write indexes this mixin moves (declared here too, so mypy reads them before it infers)
    _position: int
    _filled: bool

    def add_samples(self, **tensors: torch.Tensor) -> None:
        """Record samples: one (data shape), or a batch of ``n`` (shape (n, data shape)).

        A batch of ``num_envs`` fills the current row and moves ``memory_index`` by one; a
        smaller batch moves ``env_index`` by ``n`` and continues on the next row when it
        reaches the end of one. Tensors of size 1 also accept a batch of shape (n,).
        Names the memory has no tensor for are skipped (with one warning per name); so are,
        silently as in skrl, names created with `size=None` (skrl's agents pass `states=None`).
        A value of another dtype is stored when the cast is exact (int64 actions into a
        float32 tensor, say) and refused, naming the tensor and the value, when it is not.
        If the call raises, the memory is unchanged.
        """
        if not tensors:
            raise ValueError("add_samples: expected tensors as keyword arguments (name=tensor), got none")
        names, values, count, skipped = [], [], None, None
        full_rows = self._full_row_specs
        for name, value in tensors.items():
            spec = full_rows.get(name)
            if spec is None:
                if name not in self._absent_names:
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
        self._write(names, values, count)
        if skipped:
            self._warn_skipped(skipped)

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
            value = exact_cast(value, dtype, name)
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
        with self._lock:
            position, num_envs = self._position, self.num_envs
            if position + count < self._capacity or not self.export:
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
                store = self._storer(names, values)
                first = min(count, self._capacity - position)
                store(0, position, first)
                self._advance_by(first)
                if first < count:  # wrapped: the rest goes to the start
                    store(first, 0, count - first)
                    self._advance_by(count - first)
            else:
                self._fill_and_export(count, self._storer(names, values), [self.tensors_view[n] for n in names])

    def _storer(self, names: list[str], values: list[torch.Tensor]) -> Callable[[int, int, int], None]:
        views = self.tensors_view

        def store(offset: int, start: int, length: int) -> None:
            """Copy samples ``offset ..`` of every value into cells ``start .. start + length - 1``."""
            torch._foreach_copy_(
                [views[name][start : start + length] for name in names],
                [value[offset : offset + length] for value in values],
            )

        return store

    def _fill_and_export(
        self, count: int, store: Callable[[int, int, int], None], written: Sequence[torch.Tensor] = ()
    ) -> None:
        """Write ``count`` cells that reach the end of the storage, export, then write the rest.

        If the export raises, the cells in ``written`` (flat views), the indexes and the
        subclass state of the cells are put back as they were, and the error propagates.
        """
        start = self._position
        first = self._capacity - start
        saved_cells = [view[start:].clone() for view in written]
        saved_indexes = (self._position, self._filled)
        saved_state = self._cell_state(start, first)
        try:
            store(0, start, first)
            self._advance_by(first)
            self.save(self.export_directory, self.export_format)
        except BaseException:
            for view, cells in zip(written, saved_cells):
                view[start:].copy_(cells)
            self._position, self._filled = saved_indexes
            self._restore_cell_state(start, first, saved_state)
            raise
        if first < count:  # wrapped: the rest goes to the start, after the export
            store(first, 0, count - first)
            self._advance_by(count - first)

    def _advance_by(self, count: int) -> None:
        """Move the write position by ``count`` cells, at most to the end of the storage."""
        start = self._position
        self._on_written(start, count)
        end = start + count
        if end < self._capacity:
            self._position = end
        else:
            self._position = 0
            self._filled = True

    # -- hooks for subclasses that keep state per cell -----------------------------------------

    def _on_written(self, start: int, count: int) -> None:
        """Cells ``start .. start + count - 1`` were just written."""

    def _cell_state(self, start: int, count: int):
        """Subclass state of cells ``start ..`` that `_restore_cell_state` can put back."""
        return None

    def _restore_cell_state(self, start: int, count: int, state) -> None:
        """Put back what `_cell_state` returned, undoing `_on_written` on those cells."""
