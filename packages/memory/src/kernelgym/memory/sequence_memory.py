"""``SequenceMemory``: episode-aware sequences with burn-in, for recurrent policies."""

from __future__ import annotations

import torch

from .random_memory import RandomMemory
from .sampling import split_columns
from .validation import check_int


class SequenceMemory(RandomMemory):
    """Samples fixed-length sequences that never cross an episode boundary or the write pointer.

    Each sequence starts at a uniformly drawn written cell and follows its environment for
    ``sequence_length`` steps, preceded by up to ``burn_in`` earlier steps of the same
    episode (to warm up a recurrent state without training on them). Steps outside the
    episode or the written data are masked out and repeat the nearest valid step.

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
    replacement : bool, default True
        Draw sequence starts with replacement, as for [`RandomMemory`][kernelgym.memory.random_memory.RandomMemory].
    sequence_length : int
        Default number of trained steps per sequence.
    burn_in : int
        Default number of warm-up steps before them.
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
        *,
        sequence_length: int = 8,
        burn_in: int = 0,
        **kwargs,
    ) -> None:
        super().__init__(memory_size, num_envs, device, export, export_format, export_directory, replacement, **kwargs)
        self.sequence_length = check_int(sequence_length, "sequence_length")
        self.burn_in = check_int(burn_in, "burn_in", minimum=0)

    def sample(  # type: ignore[override]  # each memory adds its own keyword-only options
        self,
        names,
        batch_size: int,
        mini_batches: int = 1,
        sequence_length: int | None = None,
        *,
        burn_in: int | None = None,
    ):
        """Sample ``batch_size`` sequences.

        Returns
        -------
        list of list of torch.Tensor
            ``[mini_batch]``: one tensor per name of shape
            (sequences, burn_in + sequence_length, data shape), then the bool mask of shape
            (sequences, burn_in + sequence_length). The first ``burn_in`` steps are the
            warm-up; valid steps form one run, so a recurrent state starts at the first one.
        """
        views = self._views_for(names)
        length = self.sequence_length if sequence_length is None else sequence_length
        burn_in = self.burn_in if burn_in is None else check_int(burn_in, "burn_in", minimum=0)
        batch_size, mini_batches, length = self._check_sample_sizes(batch_size, mini_batches, length)
        with self._allocating(batch_size * (burn_in + length), "batch_size * (burn_in + sequence_length)"):
            return self._sample_sequences(views, batch_size, mini_batches, burn_in, length)

    def _sample_sequences(self, views, batch_size: int, mini_batches: int, burn_in: int, length: int):
        starts = self._draw(batch_size, self._check_not_empty())
        steps = burn_in + length
        cells, valid = self._sequences(starts, -burn_in, steps)
        self.sampling_indexes = cells
        flat = cells.view(-1)
        columns = [
            None if view is None else torch.index_select(view, 0, flat).view(batch_size, steps, *view.shape[1:])
            for view in views
        ]
        columns.append(valid)
        if mini_batches == 1:
            return [columns]
        return split_columns(columns, mini_batches, lambda column: column.tensor_split(mini_batches))
