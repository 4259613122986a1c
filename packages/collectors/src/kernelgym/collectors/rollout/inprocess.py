"""The in-process rollout: the learner steps the envs itself between batches."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from .batch import as_batch
from .core import as_device, collect, prepare, startup
from .nested import suply
from .state import Fragment

__all__ = ["rollout"]


def rollout(envs, actor, n_steps: int = 51, *, sticky: bool = False, device=None) -> Iterator[Fragment]:
    """Yield ``(1 + n_steps) x B`` fragments collected in this process.

    Parameters
    ----------
    envs : list of gymnasium envs, or one vector env with ``SAME_STEP`` autoreset
    actor : Actor
    n_steps : int
    sticky : bool, see `collect`.
    device : where the actor runs and the fragments are delivered (CUDA: through
        pinned host buffers).

    The yielded fragment is reused: the next iteration overwrites it.
    """
    device = as_device(device)
    pinned = device.type == "cuda"
    batch = as_batch(envs)
    buffer = prepare(batch, actor, n_steps, batch.n_envs, pinned=pinned, device=device)
    ctx, fragment = startup(batch, actor, buffer, pinned=pinned)
    while True:
        collect(batch, actor, fragment, ctx, sticky=sticky, device=device)
        if device.type == "cuda":
            yield suply(torch.Tensor.to, fragment.pyt, device=device, non_blocking=True)
        else:
            yield fragment.pyt
