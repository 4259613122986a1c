"""``RandomMemory``: uniform sampling, with or without replacement, of rows or sequences."""

from __future__ import annotations

import torch

from .base import Memory


class RandomMemory(Memory):
    """A memory sampled uniformly at random among its written cells.

    Parameters
    ----------
    memory_size : int
        Rows of every tensor, as for [`Memory`][kernelgym.memory.base.Memory].
    num_envs : int, default 1
        Parallel environments (columns).
    device : str or torch.device, optional
        Where tensors live; None picks `"cuda:0"` when available, else `"cpu"`.
    export : bool, default False
        Save the memory to a file every time it fills up.
    export_format : {"pt", "npz", "np", "csv"}, default "pt"
        Format of those files.
    export_directory : str, default ""
        Folder under which `memories/` receives the exports.
    replacement : bool
        Sample with replacement (the batch size is always honoured). Without replacement a
        batch larger than the number of written cells raises ``ValueError``.
    seed : int or torch.Generator, optional
        Seeds sampling, as for [`Memory`][kernelgym.memory.base.Memory].
    episode_end_names : sequence of str, default ("terminated", "truncated")
        Tensors that mark the end of an episode, as for [`Memory`][kernelgym.memory.base.Memory].
    """

    def __init__(
        self,
        memory_size: int,
        num_envs: int = 1,
        device: str | torch.device | None = None,
        export: bool = False,
        export_format: str = "pt",
        export_directory: str = "",
        replacement: bool = True,
        **kwargs,
    ) -> None:
        super().__init__(memory_size, num_envs, device, export, export_format, export_directory, **kwargs)
        self._replacement = bool(replacement)

    def sample(  # type: ignore[override]  # each memory adds its own keyword-only options
        self, names, batch_size: int, mini_batches: int = 1, sequence_length: int = 1, *, return_mask: bool = False
    ):
        """Sample ``batch_size`` rows (or sequences) uniformly among the written cells.

        Parameters
        ----------
        names : list or tuple of str
        batch_size : int
            Rows, or sequences when ``sequence_length > 1``.
        mini_batches : int
            Split into this many mini-batches (sizes differ by at most one sequence).
        sequence_length : int
            Steps per sequence: each sampled cell starts a sequence that follows its
            environment forward and stops at the end of its episode or at the write
            pointer; later steps repeat its last valid row.
        return_mask : bool
            Append the bool mask of valid rows to each mini-batch.

        Returns
        -------
        list of list of torch.Tensor
            ``[mini_batch][name]`` of shape (rows, data shape); sequences are consecutive
            runs of ``sequence_length`` rows.
        """
        views = self._views_for(names)
        batch_size, mini_batches, sequence_length = self._check_sample_sizes(batch_size, mini_batches, sequence_length)
        with self._allocating(batch_size * sequence_length, "batch_size * sequence_length"):
            return self._sample(views, batch_size, mini_batches, sequence_length, return_mask)

    def _sample(self, views, batch_size: int, mini_batches: int, sequence_length: int, return_mask: bool):
        starts = self._draw(batch_size, self._check_not_empty())
        if sequence_length == 1:
            indexes, valid = starts, None
        else:
            cells, valid = self._sequences(starts, 0, sequence_length)
            indexes, valid = cells.view(-1), valid.view(-1)
        self.sampling_indexes = indexes
        extras: tuple[torch.Tensor, ...] = ()
        if return_mask:
            extras = (torch.ones(indexes.shape, dtype=torch.bool, device=self.device) if valid is None else valid,)
        return self._gather(views, indexes, mini_batches, sequence_length, extras)

    def _draw(self, batch_size: int, count: int) -> torch.Tensor:
        """``batch_size`` written cells, uniformly (written cells are always 0 .. count - 1)."""
        if self._replacement:
            return torch.randint(0, count, (batch_size,), generator=self.generator, device=self.device)
        if batch_size > count:
            raise ValueError(
                f"batch_size: sampling without replacement needs at most {count} (the written cells), got {batch_size}"
            )
        return torch.randperm(count, generator=self.generator, device=self.device)[:batch_size]
