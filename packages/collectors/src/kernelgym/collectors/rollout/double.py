"""Double-buffered rollout: one worker collects into one shared buffer while the
learner trains on the other.

The two processes meet at a two-party barrier after every fragment, built from two
semaphores (``filled``: worker to learner, ``resume``: learner to worker) so that
each side can wait in slices, with a deadline, and notice a dead or departed peer;
rlplay's ``multiprocessing.Barrier.wait()`` had no timeout, and a killed worker hung
the learner forever.

::

    worker                      learner
    collect(b0)
    filled  ----------------->  wait filled; publish params; release resume;
                                yield b0 (train)
    wait resume; load params;
    collect(b1)
    filled  ----------------->  (next) wait filled; publish params; release resume;
                                yield b1
    wait resume; collect(b0)    ...
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from numpy.random import SeedSequence

from .core import as_device, check_positive, check_timeout, collect, startup
from .nested import suply
from .shared import aliased, torchify
from .state import Fragment
from .worker_setup import shared_reference, worker_setup
from .workers import CloudpickleSpawner, Workers, acquirer, get_context, worker_wait

__all__ = ["rollout"]


def _double_worker(stop, ss, filled, resume, factory, buffers, shared, n_envs, clone, close, sticky, device):
    actor, batch = worker_setup(ss, factory, n_envs, shared, clone, device)
    ctx, first = startup(batch, actor, buffers[0])
    fragments = (first, aliased(buffers[1]))
    flipflop = 0
    try:
        while True:
            collect(batch, actor, fragments[flipflop], ctx, sticky=sticky, device=device)
            filled.release()
            # the learner publishes its parameters before it lets us resume
            worker_wait(acquirer(resume), stop)
            if actor is not shared:
                actor.load_state_dict(shared.state_dict(), strict=True)
            flipflop = 1 - flipflop
    finally:
        if close:
            batch.close()


def rollout(
    factory,
    actor,
    n_steps: int,
    n_envs: int,
    *,
    sticky: bool = False,
    clone: bool = True,
    close: bool = True,
    device=None,
    start_method: str | None = "forkserver",
    timeout: float = 10.0,
    affinity=None,
    entropy=None,
) -> Iterator[Fragment]:
    """Yield ``(1 + n_steps) x n_envs`` fragments collected by one worker process.

    Parameters
    ----------
    factory : callable ``factory(seed=int)``
        Returns a gymnasium env (called ``n_envs`` times) or a vector env of
        ``n_envs`` envs with ``SAME_STEP`` autoreset (called once).
    actor : Actor
        Its parameters are copied to the worker before every fragment.
    n_steps, n_envs : int
    sticky, clone : see `collect`; ``clone`` gives the worker a private
        copy of the actor. The learner's parameters at the ``k``-th ``next()`` are
        published to the worker, which collects fragment ``k + 1`` with them
        (fragment ``k + 1`` is being collected while the learner trains on ``k``).
    close : close the envs when done (False for envs that break on ``close``).
    device : where the yielded fragments go (CPU: the shared buffer itself, valid
        until the next iteration).
    start_method : ``"forkserver"`` (default), ``"fork"``, ``"spawn"`` or None (the
        platform's default). ``"fork"`` starts fastest but is unsafe once the learner
        has used OpenMP threads (numba's parallel CPU kernels: kernelgym envs).
    timeout : float
        Seconds to wait for a fragment before raising
        `WorkerTimeoutError` (a ``TimeoutError``); a dead
        worker raises `WorkerError` as soon as it is noticed.
    affinity : the torch device the worker's actor runs on (default CPU).
    entropy : seed of the numpy ``SeedSequence`` (reproducible runs).
    """
    check_positive("n_steps", n_steps)
    check_positive("n_envs", n_envs)
    check_timeout(timeout)
    device, affinity = as_device(device), as_device(affinity)
    mp = get_context(start_method)

    def fragments():

        shared, reference = shared_reference(factory, actor, n_steps, n_envs, close)
        buffers = torchify((reference,) * 2, shared=True)
        filled, resume = mp.Semaphore(0), mp.Semaphore(0)
        ss = SeedSequence(entropy)
        workers = Workers(
            mp,
            _double_worker,
            [
                (
                    ss,
                    filled,
                    resume,
                    CloudpickleSpawner(factory),
                    buffers,
                    shared,
                    n_envs,
                    clone,
                    close,
                    sticky,
                    affinity,
                )
            ],
            name="double",
        ).start()
        flipflop = 0
        try:
            while True:
                workers.wait(acquirer(filled), timeout=timeout, what="double rollout: waiting for a fragment")
                # the worker is parked until `resume`: no lock needed to publish
                shared.load_state_dict(actor.state_dict(), strict=True)
                resume.release()  # the worker refills the other buffer meanwhile
                if device.type == "cpu":
                    yield buffers[flipflop]
                else:
                    yield suply(torch.Tensor.to, buffers[flipflop], device=device, non_blocking=True)
                flipflop = 1 - flipflop
        finally:
            workers.shutdown()

    return fragments()
