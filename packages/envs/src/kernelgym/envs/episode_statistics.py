"""Per-episode return and length, kept on the env's device with torch ops (no host sync).

`KernelVectorEnv.step` updates an `EpisodeStatistics` after every step and hands its
tensors out in ``info`` with the conventions of gymnasium's vector
``RecordEpisodeStatistics``::

    info["episode"] = {"r": returns, "l": lengths}   # (num_envs,) or (num_envs, num_agents) returns
    info["_episode"] = mask                           # (num_envs,) bool: an episode ended this step

Entries where the mask is False are 0. gymnasium's wrapper also reports ``"t"``
(wall-clock seconds), a host value; it is left out here because reading the clock per
env needs the host, and wall time is not the env's business.

In ``next_step`` autoreset mode the step that resets an env (reward 0, both flags
False) is not counted in the new episode's length, as gymnasium's wrapper does.
"""

from __future__ import annotations

import torch
from gymnasium.vector import AutoresetMode

__all__ = ["EpisodeStatistics"]


class EpisodeStatistics:
    """Running and finished-episode return and length of every env, on one device.

    Every buffer is allocated once; `update` and `reset` run in place, so the tensors
    in `info` are views that the next step overwrites, like the env's other outputs.

    Parameters
    ----------
    rewards : torch.Tensor
        The env's reward buffer, ``(num_envs,)`` or ``(num_envs, num_agents)``.
    autoreset_mode : gymnasium.vector.AutoresetMode
    """

    def __init__(self, rewards: torch.Tensor, autoreset_mode: AutoresetMode):
        num_envs = rewards.shape[0]
        device = rewards.device
        self._next_step = autoreset_mode is AutoresetMode.NEXT_STEP
        self._running_return = torch.zeros_like(rewards)
        self._running_length = torch.zeros(num_envs, dtype=torch.int64, device=device)
        self._counts = torch.ones(num_envs, dtype=torch.bool, device=device)  # this step belongs to an episode
        self._done = torch.zeros(num_envs, dtype=torch.bool, device=device)
        # the done mask shaped to broadcast over the reward's agent axis
        self._done_rows = self._done.view(num_envs, *([1] * (rewards.dim() - 1)))
        self.returns = torch.zeros_like(rewards)
        self.lengths = torch.zeros(num_envs, dtype=torch.int64, device=device)
        self.info = {"episode": {"r": self.returns, "l": self.lengths}, "_episode": self._done}

    def reset(self) -> None:
        """Every env starts a new episode (after ``KernelVectorEnv.reset``)."""
        for buffer in (self._running_return, self._running_length, self.returns, self.lengths):
            buffer.zero_()
        self._done.fill_(False)
        self._counts.fill_(True)

    def update(self, rewards: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor) -> None:
        """Add one step's rewards; record and restart the episodes that ended in it."""
        self._running_return.add_(rewards)  # a next_step reset step has reward 0
        self._running_length.add_(self._counts)
        torch.logical_or(terminated, truncated, out=self._done)
        torch.mul(self._running_return, self._done_rows, out=self.returns)  # 0 where no episode ended
        torch.mul(self._running_length, self._done, out=self.lengths)
        self._running_return.masked_fill_(self._done_rows, 0.0)
        self._running_length.masked_fill_(self._done, 0)
        if self._next_step:
            # the next step of an env that ended here is its reset step: not part of an episode
            torch.logical_not(self._done, out=self._counts)
