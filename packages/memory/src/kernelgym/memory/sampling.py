"""Reading samples back: sampling by index, all rows in order, sequences within episodes."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

import torch

from .sequences import chronological_cells, episode_windows, sequence_cells
from .validation import as_index_tensor, check_int

if TYPE_CHECKING:
    from ._state import MemoryState as _MixinBase
else:
    _MixinBase = object  # the Protocol types the mixin; at run time it is a plain class

#: most rows one sampling call returns: 8 TB of int64 cell indexes alone, beyond any machine
MAX_ROWS = 2**40


def split_columns(columns, mini_batches: int, split) -> list[list[torch.Tensor | None]]:
    """`[mini_batch][column]`: each tensor column cut by `split`; a None column (a tensor
    created with `size=None`) is None in every mini-batch, as skrl's memory returns it."""
    parts = [[None] * mini_batches if column is None else split(column) for column in columns]
    return [list(batch) for batch in zip(*parts)]


class Sampler(_MixinBase):
    """Mixin of `Memory`: the sampling methods shared by every memory.

    Only written cells are ever returned; subclasses implement `sample`.
    """

    def sample(self, names, batch_size: int, mini_batches: int = 1, sequence_length: int = 1, **kwargs):
        """Sample a batch; implemented by the subclasses (e.g. `RandomMemory`)."""
        raise NotImplementedError(f"{type(self).__name__} does not sample; use RandomMemory or another subclass")

    def _views_for(self, names) -> list[torch.Tensor | None]:
        """Flat views of the named tensors; None for a name created with `size=None` (as skrl)."""
        if isinstance(names, str) or not isinstance(names, Sequence):
            raise TypeError(f"names: expected a list or tuple of tensor names, got {names!r}")
        absent = self._absent_names
        # a name that is no str (a list, None) is no set member: _tensor names it in its KeyError
        return [
            None if isinstance(name, str) and name in absent else self._tensor(name, self.tensors_view)
            for name in names
        ]

    def _check_sample_sizes(self, batch_size, mini_batches, sequence_length) -> tuple[int, int, int]:
        """Validated ``batch_size``, ``mini_batches`` (at most ``batch_size``) and ``sequence_length``."""
        batch_size = check_int(batch_size, "batch_size")
        mini_batches = check_int(mini_batches, "mini_batches")
        if mini_batches > batch_size:
            raise ValueError(f"mini_batches: expected at most batch_size={batch_size}, got {mini_batches}")
        return batch_size, mini_batches, check_int(sequence_length, "sequence_length")

    @contextmanager
    def _allocating(self, rows: int, arguments: str) -> Iterator[None]:
        """Refuse a call that returns ``rows`` rows when torch could not allocate them, with a
        ValueError naming ``arguments`` (the allocator's own message names none)."""
        if rows > MAX_ROWS:
            raise ValueError(f"{arguments}: expected at most {MAX_ROWS} rows per call (2**40), got {rows}")
        try:
            yield
        except (MemoryError, RuntimeError) as error:  # torch.OutOfMemoryError is a RuntimeError
            text = str(error)
            if not isinstance(error, MemoryError) and "allocat" not in text and "out of memory" not in text:
                raise
            raise ValueError(
                f"{arguments}: {rows} rows are more than the device could allocate ({text.splitlines()[0][:160]})"
            ) from error

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
        mini_batches = check_int(mini_batches, "mini_batches")
        indexes = as_index_tensor(indexes, "indexes", self.device)
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
        columns = [None if view is None else torch.index_select(view, 0, indexes) for view in views] + list(extras)
        if mini_batches == 1:
            return [columns]
        return split_columns(columns, mini_batches, lambda column: column.split(sizes))

    def sample_all(self, names, mini_batches: int = 1, sequence_length: int = 1, *, return_mask: bool = False):
        """All written rows, oldest first.

        With ``sequence_length > 1`` the rows are grouped environment by environment into
        windows of ``sequence_length`` steps that never cross an episode boundary (a short
        window is padded with its last row); ``return_mask=True`` appends the bool mask of
        real rows to each mini-batch. Mini-batches keep every row (sizes differ by at most
        one window).
        """
        views = self._views_for(names)
        mini_batches = check_int(mini_batches, "mini_batches")
        sequence_length = check_int(sequence_length, "sequence_length")
        count = self._check_not_empty()
        with self._allocating(count * sequence_length, "sequence_length"):
            return self._sample_all(views, count, mini_batches, sequence_length, return_mask)

    def _sample_all(self, views, count: int, mini_batches: int, sequence_length: int, return_mask: bool):
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
            columns = [None if view is None else view[:count] for view in views] + ([valid] if return_mask else [])
            if mini_batches == 1:
                return [columns]
            return split_columns(columns, mini_batches, lambda column: column.tensor_split(mini_batches))
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
        generator.manual_seed(check_int(seed, "seed", minimum=0))
        return generator
