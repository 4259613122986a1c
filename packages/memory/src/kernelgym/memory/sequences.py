"""Index arithmetic for sequences that respect episode boundaries and the write pointer.

A memory's cells are numbered row-major, ``cell = row * num_envs + env``, which is also
the order in which they are written. A sequence follows one environment through time, so
consecutive steps are ``num_envs`` cells apart. The age of a cell (0 for the newest) tells
whether a step is still written and on the right side of the write pointer.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

EpisodeEnds = Callable[[torch.Tensor], torch.Tensor] | None


def cell_ages(cells: torch.Tensor, position: int, capacity: int) -> torch.Tensor:
    """Age of each cell: 0 for the newest written cell, ``capacity - 1`` for the oldest."""
    return torch.remainder(position - 1 - cells, capacity)


def sequence_cells(
    starts: torch.Tensor,
    first_step: int,
    length: int,
    *,
    position: int,
    count: int,
    capacity: int,
    num_envs: int,
    episode_ends: EpisodeEnds,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Cells of sequences around start cells, with a validity mask.

    Step ``k`` of a sequence (``first_step <= k < first_step + length``, ``first_step <= 0``)
    is the cell ``k`` time steps after its start cell, in the same environment. A step is
    valid when it was written, does not cross the write pointer, and lies in the start's
    episode. Invalid steps hold the nearest valid step's cell, so their data is real.

    Parameters
    ----------
    starts : torch.Tensor
        ``(batch,)`` int64 written cells.
    first_step, length : int
        Steps ``first_step .. first_step + length - 1`` relative to each start (negative
        steps are a burn-in before it).
    position, count, capacity, num_envs : int
        The memory's linear write position, number of written cells, cells in all, envs.
    episode_ends : callable or None
        Maps a tensor of cells to a bool tensor of the same shape, True where an episode
        ended at that cell; None when the memory has no episode tensors.

    Returns
    -------
    cells : torch.Tensor
        ``(batch, length)`` int64.
    valid : torch.Tensor
        ``(batch, length)`` bool, a contiguous run of True that contains step 0.
    """
    steps = torch.arange(first_step, first_step + length, device=starts.device)
    shifts = steps * num_envs
    ages = cell_ages(starts, position, capacity).unsqueeze(1)
    cells = torch.remainder(starts.unsqueeze(1) + shifts, capacity)
    # A step's age is the start's age minus its shift until it wraps past the pointer.
    step_ages = ages - shifts
    valid = (step_ages >= 0) & (step_ages < count)
    if episode_ends is not None:
        ended = episode_ends(cells)
        zero = -first_step
        after = ended[:, zero:]
        # step k > 0 leaves the episode if it ended at any step in [0, k)
        blocked_after = (after.cumsum(1) - after.long()) > 0
        before = ended[:, :zero]
        # step k < 0 is in an earlier episode if one ended at any step in [k, 0)
        blocked_before = before.flip(1).cumsum(1).flip(1) > 0
        valid &= ~torch.cat((blocked_before, blocked_after), dim=1)
    # Valid steps form one run around step 0: clamp the others onto its ends.
    num_valid = valid.sum(1, keepdim=True)
    first_valid = valid.int().argmax(1, keepdim=True)
    positions = torch.arange(length, device=starts.device).unsqueeze(0)
    nearest = torch.minimum(torch.maximum(positions, first_valid), first_valid + num_valid - 1)
    return cells.gather(1, nearest), valid


def chronological_cells(*, position: int, count: int, capacity: int, device: torch.device) -> torch.Tensor:
    """All written cells, oldest first."""
    if count < capacity:
        return torch.arange(count, device=device)
    return torch.remainder(torch.arange(position, position + capacity, device=device), capacity)


def episode_windows(
    length: int,
    *,
    position: int,
    count: int,
    capacity: int,
    num_envs: int,
    episode_ends: EpisodeEnds,
    device: torch.device,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Every written cell exactly once, cut into per-environment windows of ``length`` steps.

    Environment by environment, oldest first, a new window starts every ``length`` steps
    of an episode and at every episode start, so no window crosses an episode boundary.
    Short windows are padded with their last valid cell.

    Returns
    -------
    cells : torch.Tensor
        ``(windows, length)`` int64.
    valid : torch.Tensor
        ``(windows, length)`` bool, True on the cells that belong to the window.
    """
    memory_size = capacity // num_envs
    grid = torch.arange(capacity, device=device).view(memory_size, num_envs)
    ages = cell_ages(grid, position, capacity)
    ages = torch.where(ages < count, ages, -1)  # unwritten cells sort last
    ages, order = torch.sort(ages, dim=0, descending=True, stable=True)
    cells = grid.gather(0, order).t()  # (num_envs, memory_size), oldest first per env
    written = (ages >= 0).t()
    time = torch.arange(memory_size, device=device).expand(num_envs, memory_size)
    starts_episode = torch.zeros_like(written)
    starts_episode[:, 0] = True
    if episode_ends is not None:
        starts_episode[:, 1:] = episode_ends(cells[:, :-1])
    episode_start = torch.where(starts_episode, time, 0).cummax(1).values
    step_in_window = torch.remainder(time - episode_start, length)
    cells, step_in_window = cells[written], step_in_window[written]
    window = torch.cumsum(step_in_window == 0, 0) - 1
    num_windows = int(window[-1]) + 1 if window.numel() else 0
    out = torch.full((num_windows, length), -1, dtype=torch.long, device=device)
    out[window, step_in_window] = cells
    valid = out >= 0
    last = valid.sum(1, keepdim=True) - 1
    out = torch.where(valid, out, out.gather(1, last))
    return out, valid
