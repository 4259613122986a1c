"""Episodic rollout: whole trajectories, one ``T x 1`` fragment per finished episode."""

from __future__ import annotations

from collections.abc import Iterator

import numpy
import torch

from .core import episode, react
from .nested import getitem, suply, tuply
from .state import Fragment

__all__ = ["rollout"]


def rollout(envs, actor, *, batch_size: int = 1, device=None) -> Iterator[list[Fragment]]:
    """Yield lists of ``batch_size`` complete episodes as `Fragment` s.

    Each fragment holds one episode of one env: ``state`` is ``(1 + T) x 1 x ...``
    (the start record, then every transition up to the true final observation),
    ``actor`` is ``(1 + T) x 1 x ...`` (the last entry is the actor's look-ahead
    reaction to the final state), ``env`` is ``T x 1 x ...`` and ``hx`` the initial
    recurrent state. Episodes are returned in the order they end.
    """
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size: expected a positive int, got {batch_size!r}")
    it = episode(envs, actor, device=device)
    try:
        history: list = []
        queue: list = []
        base, t = 0, 0
        beginning = None
        while True:
            while len(queue) >= batch_size:
                yield queue[:batch_size]
                queue = queue[batch_size:]
            cur, hx, act_info, nxt, env = suply(torch.clone, next(it))
            if beginning is None:
                beginning = numpy.zeros(cur.fin.shape[1], dtype=int)
                initial_hx = actor.reset(hx, slice(None))  # every episode starts from h_*
            history.append((cur, act_info, env))
            t += 1
            for j in map(int, nxt.fin[0].nonzero(as_tuple=True)[0]):
                t0, t1 = beginning[j] - base, t - base
                records, current, terminal, hx_j = getitem((history[t0:t1], cur, nxt, hx), index=(slice(None), [j]))
                states, infos, envs_ = zip(*records)
                with torch.no_grad():
                    # the terminal state's recurrent state: the generator has already
                    # reset it, so replay this env's last step from the state before
                    _, hx_j, _ = react(actor, current, hx_j, virtual=True)
                    _, _, last_info = react(actor, terminal, hx_j, virtual=True)
                queue.append(
                    Fragment(
                        state=tuply(torch.cat, *states, terminal),
                        actor=tuply(torch.cat, *infos, last_info),
                        env=tuply(torch.cat, *envs_),
                        hx=getitem(initial_hx, index=(slice(None), [j])),
                    )
                )
                beginning[j] = t
            oldest = int(beginning.min())
            if oldest > base:
                history, base = history[oldest - base :], oldest
    finally:
        it.close()
