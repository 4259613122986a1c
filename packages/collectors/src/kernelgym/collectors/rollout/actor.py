"""The actor protocol the rollout engines drive."""

from __future__ import annotations

from typing import Any

import torch

from .nested import suply

__all__ = ["Actor"]


class Actor(torch.nn.Module):
    """Base class of actors: subclass it and implement `step`.

    The engines call ``step`` with ``T x B x ...`` inputs (``T = 1`` while
    collecting) and reset the recurrent state of envs whose episode ended through
    `reset`. A non-recurrent actor returns ``hx = ()``.
    """

    def step(self, stepno, obs, act, rew, fin, *, hx=None, virtual=False):
        r"""React to $(t, x_t, a_{t-1}, r_t, d_t, h_t)$ with $(a_t, h_{t+1}, A_t)$.

        Parameters
        ----------
        stepno, obs, act, rew, fin : tensors (nested for obs and act), ``T x B x ...``
            ``fin[t, j]`` says that ``obs[t, j]`` starts a new episode.
        hx : nested tensors or None
            The recurrent state $h_t$ (``None``: initialize it).
        virtual : bool
            True for look-ahead calls whose action is never taken in an env (the
            bootstrap step at the end of a fragment).

        Returns
        -------
        act : the actions $a_t$, ``T x B x ...`` (same structure as ``act``).
        hx : the next recurrent state $h_{t+1}$, or ``()``.
        info : nested tensors ``T x B x ...`` (e.g. value estimates, log-probs).
        """
        raise NotImplementedError(f"{type(self).__name__} must implement Actor.step")

    def reset(self, hx: Any, at: Any) -> Any:
        """Return a copy of ``hx`` with the envs ``at`` (int, slice, index or bool
        mask over dim 1) set to the initial (zero) recurrent state."""
        if hx is None:
            raise ValueError("Actor.reset: hx is None; pass hx=None to .step to initialize it")

        def _zeroed(x: torch.Tensor) -> torch.Tensor:
            x = x.clone()
            x[:, at] = 0
            return x

        return suply(_zeroed, hx)
