"""``PrioritizedMemory``: proportional prioritized replay over a torch sum tree."""

from __future__ import annotations

import math
import numbers

import torch

from .base import Memory
from .sum_tree import SumTree
from .validation import as_index_tensor, as_real_tensor


def _check_real(value, argument: str, low: float) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not low <= float(value) < math.inf:
        raise ValueError(f"{argument}: expected a finite number >= {low}, got {value!r}")
    return float(value)


class PrioritizedMemory(Memory):
    """Samples cells with probability proportional to ``(priority + epsilon) ** alpha``.

    New cells get the largest priority seen so far; `update_priorities` sets the
    priorities of sampled cells (e.g. their absolute TD errors). Sampling is stratified and
    runs entirely on the memory's device.

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
    alpha : float
        How much prioritization is used (0 is uniform).
    beta : float
        Importance-sampling correction exponent for the weights (1 fully corrects).
    epsilon : float
        Added to priorities so that no written cell has probability 0.
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
        *,
        alpha: float = 0.6,
        beta: float = 0.4,
        epsilon: float = 1e-6,
        **kwargs,
    ) -> None:
        super().__init__(memory_size, num_envs, device, export, export_format, export_directory, **kwargs)
        self.alpha = _check_real(alpha, "alpha", 0.0)
        self.beta = _check_real(beta, "beta", 0.0)
        self.epsilon = _check_real(epsilon, "epsilon", 0.0)
        self._tree = SumTree(self._capacity, self.device)
        #: largest weight of one cell: the sum of all cells' weights must stay a finite float64
        self._weight_limit = torch.finfo(torch.float64).max / (2 * self._capacity)
        self._max_weight = 1.0  # largest (priority + epsilon) ** alpha so far: new cells get it

    def _on_written(self, start: int, count: int) -> None:
        self._tree.fill_range(start, count, self._max_weight)

    def _cell_state(self, start: int, count: int):
        return self._tree.leaves[start : start + count].clone(), self._max_weight

    def _restore_cell_state(self, start: int, count: int, state) -> None:
        leaves, self._max_weight = state
        self._tree.fill_range(start, count, leaves)

    def reset(self) -> None:
        with self._lock:
            super().reset()
            self._tree.clear()
            self._max_weight = 1.0

    def sample(  # type: ignore[override]  # each memory adds its own keyword-only options
        self,
        names,
        batch_size: int,
        mini_batches: int = 1,
        sequence_length: int = 1,
        *,
        return_mask: bool = False,
        return_weights: bool = False,
    ):
        """Sample ``batch_size`` rows (or sequences starting at) prioritized cells.

        ``return_mask`` appends the validity mask (as for `RandomMemory`);
        ``return_weights`` then appends importance-sampling weights
        ``(count * P(i)) ** -beta``, normalised by the largest in the batch.
        """
        views = self._views_for(names)
        batch_size, mini_batches, sequence_length = self._check_sample_sizes(batch_size, mini_batches, sequence_length)
        with self._allocating(batch_size * sequence_length, "batch_size * sequence_length"):
            return self._sample(views, batch_size, mini_batches, sequence_length, return_mask, return_weights)

    def _sample(self, views, batch_size, mini_batches, sequence_length, return_mask, return_weights):
        count = self._check_not_empty()
        starts = self._tree.sample(batch_size, self.generator)
        # every written cell at weight 0 (priorities 0 with epsilon 0): equal weights, so uniform;
        # chosen on the device, without a host synchronisation
        all_zero = self._tree.total() == 0
        uniform = torch.randint(0, count, (batch_size,), generator=self.generator, device=self.device)
        starts = torch.where(all_zero, uniform, starts)
        # strata come out in cell order: shuffle so that mini-batches are alike
        starts = torch.index_select(starts, 0, torch.randperm(batch_size, generator=self.generator, device=self.device))
        if sequence_length == 1:
            indexes, valid = starts, torch.ones(batch_size, dtype=torch.bool, device=self.device)
        else:
            cells, valid = self._sequences(starts, 0, sequence_length)
            indexes, valid = cells.view(-1), valid.view(-1)
        self.sampling_indexes = indexes
        extras = [valid] if return_mask else []
        if return_weights:
            extras.append(self._importance_weights(starts, all_zero).repeat_interleave(sequence_length))
        return self._gather(views, indexes, mini_batches, sequence_length, extras)

    def _importance_weights(self, starts: torch.Tensor, all_zero: torch.Tensor) -> torch.Tensor:
        """``(count * P(i)) ** -beta`` over its batch maximum, i.e. ``(min_j w_j / w_i) ** beta``.

        The ratio form never divides by the total nor raises a tiny probability to a
        negative power, so extreme weights give finite results in (0, 1].
        """
        leaves = torch.index_select(self._tree.leaves, 0, starts)
        ratios = torch.where(all_zero, 1.0, leaves.min() / leaves)
        return (ratios**self.beta).to(torch.get_default_dtype())

    def update_priorities(self, indexes, priorities) -> None:
        """Set the priorities of written cells (e.g. to absolute TD errors).

        Parameters
        ----------
        indexes : 1-d int tensor or sequence
            Flat cell indexes, e.g. ``get_sampling_indexes()``.
        priorities : 1-d real tensor or sequence
            Finite, non-negative, one per index. If an index repeats, one of its
            priorities is kept.
        """
        indexes = as_index_tensor(indexes, "indexes", self.device)
        # read in the tree's float64: a list read as float32 would turn a finite 1e39 into inf
        priorities = as_real_tensor(priorities, "priorities", self.device, torch.float64)
        priorities = priorities.reshape(-1).to(torch.float64)
        if priorities.shape != indexes.shape:
            raise ValueError(f"priorities: expected {indexes.numel()} values (one per index), got {priorities.numel()}")
        if not indexes.numel():
            return
        count = len(self)
        # one host synchronisation for every check
        low, high, finite, smallest = torch.stack(
            (
                indexes.min().double(),
                indexes.max().double(),
                torch.isfinite(priorities).all().double(),
                priorities.min(),
            )
        ).tolist()
        if low < 0 or high >= count:
            raise ValueError(
                f"indexes: expected written cells in [0, {count}), got values in [{int(low)}, {int(high)}]"
            )
        if not finite or smallest < 0:
            raise ValueError(
                "priorities: expected finite values >= 0, got "
                + (str(priorities.tolist()) if priorities.numel() <= 8 else "non-finite or negative values")
            )
        weights = (priorities + self.epsilon) ** self.alpha
        largest = float(weights.max())
        if not largest <= self._weight_limit:
            raise ValueError(
                f"priorities: expected values whose weight (priority + epsilon) ** alpha (alpha={self.alpha}, "
                f"epsilon={self.epsilon}) is at most {self._weight_limit:.3g} (so that the sum over "
                f"{self._capacity} cells stays finite), got a weight of {largest:.3g} "
                f"from a priority of {float(priorities.max()):.6g}"
            )
        self._tree.update(indexes.long(), weights)
        self._max_weight = max(self._max_weight, largest)

    def get_priorities(self) -> torch.Tensor:
        """Sampling weight ``(priority + epsilon) ** alpha`` of every cell (0 for unwritten), flat."""
        return self._tree.leaves.clone()

    def _extra_state(self) -> dict[str, torch.Tensor]:
        return {"priority": self._tree.leaves.detach().cpu().clone()}

    def _check_extra_state(self, snapshot) -> None:
        priority = snapshot.extra.get("priority")
        if priority is None:
            return
        if priority.shape != (self._capacity,) or priority.dtype != torch.float64:
            raise ValueError(
                f"path: expected the file's priorities as float64 of shape ({self._capacity},), "
                f"got {priority.dtype} of shape {tuple(priority.shape)}"
            )
        if not bool(((priority >= 0) & (priority <= self._weight_limit)).all()):
            raise ValueError(
                f"path: expected the file's priority weights in [0, {self._weight_limit:.3g}] "
                f"(finite, summing to a finite total), got values in [{float(priority.min())}, {float(priority.max())}]"
            )
        unwritten = priority[snapshot.count :]
        if bool((unwritten != 0).any()):
            raise ValueError(
                f"path: expected priority 0 on the {unwritten.numel()} unwritten cells "
                f"(from cell {snapshot.count}), got {int((unwritten != 0).sum())} nonzero"
            )

    def _load_extra_state(self, extra: dict[str, torch.Tensor]) -> None:
        priority = extra.get("priority")
        if priority is None:  # a file from another memory: written cells start equal
            priority = torch.zeros(self._capacity, dtype=torch.float64)
            priority[: len(self)] = 1.0
        priority = priority.to(self.device)
        self._tree.set_all(priority)
        self._max_weight = max(1.0, float(priority.max())) if priority.numel() else 1.0
