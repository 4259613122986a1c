"""A sum tree held in one torch tensor: priority updates and sampling without Python loops per sample."""

from __future__ import annotations

import torch


class SumTree:
    """Binary tree of partial sums over ``capacity`` non-negative leaf values.

    Node ``i`` has children ``2i`` and ``2i + 1``; the root is node 1 and leaf ``k`` is node
    ``leaf_offset + k``. Every operation is a handful of vectorised torch ops per tree
    level (about log2(capacity) levels), on whatever device the tree lives.
    Sums are kept in float64 and recomputed from the children (never incremented), so
    they do not drift.

    Parameters
    ----------
    capacity : int
        Number of leaves.
    device : torch.device
    """

    def __init__(self, capacity: int, device: torch.device) -> None:
        self.capacity = capacity
        self.depth = max(0, (capacity - 1).bit_length())
        self.leaf_offset = 1 << self.depth
        self.tree = torch.zeros(2 * self.leaf_offset, dtype=torch.float64, device=device)
        # children of node i are children[i] = (tree[2i], tree[2i + 1])
        self._children = self.tree.view(self.leaf_offset, 2)
        self._dirty: tuple[int, int] | None = None  # leaf range set but not yet summed up

    @property
    def leaves(self) -> torch.Tensor:
        """The leaf values, shape (capacity,) (a view)."""
        return self.tree[self.leaf_offset : self.leaf_offset + self.capacity]

    def total(self) -> torch.Tensor:
        """Sum of all leaves, a 0-d tensor."""
        self._refresh()
        return self.tree[1]

    def fill_range(self, start: int, count: int, value: float) -> None:
        """Set leaves ``start .. start + count - 1`` to ``value``; sums are updated lazily."""
        self.leaves[start : start + count] = value
        low, high = start, start + count - 1
        if self._dirty is not None:
            low, high = min(low, self._dirty[0]), max(high, self._dirty[1])
        self._dirty = (low, high)

    def update(self, leaves: torch.Tensor, values: torch.Tensor) -> None:
        """Set the given leaves (int64) to ``values`` and update their ancestors."""
        self._refresh()
        nodes = leaves + self.leaf_offset
        self.tree.index_copy_(0, nodes, values.to(torch.float64))
        for _ in range(self.depth):
            nodes = nodes // 2
            self.tree.index_copy_(0, nodes, torch.index_select(self._children, 0, nodes).sum(1))

    def set_all(self, values: torch.Tensor) -> None:
        """Replace every leaf and rebuild all sums."""
        self.tree.zero_()
        self.leaves.copy_(values)
        self._dirty = (0, self.capacity - 1)
        self._refresh()

    def clear(self) -> None:
        """All leaves to zero."""
        self.tree.zero_()
        self._dirty = None

    def _refresh(self) -> None:
        if self._dirty is None:
            return
        low, high = self._dirty[0] + self.leaf_offset, self._dirty[1] + self.leaf_offset
        for _ in range(self.depth):
            low, high = low // 2, high // 2
            self.tree[low : high + 1] = self._children[low : high + 1].sum(1)
        self._dirty = None

    def sample(self, count: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """Draw ``count`` leaves with probability proportional to their values (stratified).

        The total is cut into ``count`` equal strata and one point is drawn uniformly in
        each, then every point descends the tree level by level. Leaves of value 0 are
        never drawn. The caller makes sure the total is positive.
        """
        total = self.total()
        device = self.tree.device
        points = torch.arange(count, device=device, dtype=torch.float64)
        points += torch.rand(count, generator=generator, device=device, dtype=torch.float64)
        points *= total / count
        nodes = torch.ones(count, dtype=torch.long, device=device)
        for _ in range(self.depth):
            children = torch.index_select(self._children, 0, nodes)
            left = children[:, 0]
            # rounding can put a point just past a subtree's sum: never step into an empty one
            go_right = (points >= left) & (children[:, 1] > 0)
            points = torch.where(go_right, points - left, points)
            nodes = 2 * nodes + go_right
        return nodes - self.leaf_offset
