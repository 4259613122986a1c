"""Multi-actor rollout: ``n_actors`` worker processes fill a pool of shared buffers.

Each worker steps its own batch of ``n_per_actor`` envs (a list of gymnasium envs,
or, for throughput, ONE vector env from the factory) with its own copy of the actor.
Buffer indices circulate through two queues: a worker takes an ``empty`` index,
collects a fragment into that buffer and puts the index on ``ready``; the learner
stacks ``n_per_batch`` ready fragments into one batch along dim 1 and returns their
indices to ``empty``. Every wait has a deadline (see `workers`).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from numpy.random import SeedSequence

from .core import as_device, check_positive, check_timeout, collect, copy_, startup
from .nested import getitem, suply, tuply
from .shared import aliased, torchify
from .state import Fragment
from .worker_setup import shared_reference, worker_setup
from .workers import CloudpickleSpawner, Workers, get_context, locked, worker_check, worker_wait

__all__ = ["rollout"]


def _pool_worker(stop, ss, lock, empty, ready, factory, buffers, shared, n_envs, clone, close, sticky, device, timeout):
    actor, batch = worker_setup(ss, factory, n_envs, shared, clone, device)
    # a private buffer for the running context: the shared ones belong to whoever
    # holds their index
    ctx, _ = startup(batch, actor, suply(torch.clone, buffers[0]))
    fragments = [aliased(buffer) for buffer in buffers]
    check = worker_check(stop)
    try:
        while True:
            index = worker_wait(lambda slice_s: empty.get(timeout=slice_s), stop)
            if actor is not shared:
                with locked(lock, timeout=timeout, check=check, what="worker: shared actor lock"):
                    actor.load_state_dict(shared.state_dict(), strict=True)
            collect(batch, actor, fragments[index], ctx, sticky=sticky, device=device)
            ready.put(index)
    finally:
        if close:
            batch.close()


def rollout(
    factory,
    actor,
    n_steps: int,
    n_actors: int = 8,
    n_per_actor: int = 2,
    n_buffers: int = 16,
    n_per_batch: int = 4,
    *,
    sticky: bool = False,
    pinned: bool = False,
    clone: bool = True,
    close: bool = True,
    device=None,
    start_method: str | None = "forkserver",
    timeout: float = 10.0,
    affinity=None,
    entropy=None,
) -> Iterator[Fragment]:
    """Yield ``(1 + n_steps) x (n_per_batch * n_per_actor)`` batches of fragments.

    Parameters
    ----------
    factory : callable ``factory(seed=int)``
        A gymnasium env (called ``n_per_actor`` times per worker), or a vector env of
        ``n_per_actor`` envs with ``SAME_STEP`` autoreset (called once per worker; for
        throughput, let it step on one thread, e.g. ``numba.set_num_threads(1)``, as
        every worker already has a core). It is also called once, with ``seed=None``,
        in the learner for the buffers' shapes.
    actor : Actor, copied to the workers through shared memory after every batch.
    n_steps : int, the fragment length.
    n_actors : int, worker processes.
    n_per_actor : int, envs per worker.
    n_buffers : int, shared fragment buffers (at least ``n_actors``; spare buffers
        let workers collect while the learner copies).
    n_per_batch : int, fragments per yielded batch (at most ``n_buffers``).
    sticky, clone, close : see `collect` and `rollout`.
    pinned : keep the batch on the host in pinned memory, for the learner's own
        ``non_blocking`` copies to a GPU.
    device : where the batch lives (otherwise).
    start_method, timeout, affinity, entropy : see `rollout`;
        ``affinity`` may be a list with one device per worker.

    The yielded batch is reused: the next iteration overwrites it. Fragments of one
    worker arrive in order; with several workers their interleaving depends on
    timing, while each worker's data is reproducible from ``entropy``.
    """
    for name, value in (
        ("n_steps", n_steps),
        ("n_actors", n_actors),
        ("n_per_actor", n_per_actor),
        ("n_buffers", n_buffers),
        ("n_per_batch", n_per_batch),
    ):
        check_positive(name, value)
    if n_buffers < n_actors:
        raise ValueError(f"n_buffers: expected at least n_actors={n_actors} buffers, got {n_buffers}")
    if n_per_batch > n_buffers:
        raise ValueError(f"n_per_batch: expected at most n_buffers={n_buffers}, got {n_per_batch}")
    check_timeout(timeout)
    device = as_device(device)
    if pinned and device.type != "cpu":
        raise ValueError(f"pinned: a pinned batch stays on the host, but device={device} was asked for too")
    affinity = list(affinity) if isinstance(affinity, (list, tuple)) else [affinity] * n_actors
    if len(affinity) != n_actors:
        raise ValueError(f"affinity: expected one device per actor ({n_actors}), got {len(affinity)}")
    mp = get_context(start_method)

    def batches():

        shared, reference = shared_reference(factory, actor, n_steps, n_per_actor, close)
        stacked = suply(
            lambda x: x.to(device) if not pinned else x.pin_memory(),
            tuply(torch.stack, *(reference,) * n_per_batch, dim=1),
        )
        batch = suply(torch.flatten, stacked, start_dim=1, end_dim=2)
        # hx has no time dim: its batch dim is dim 1 as well (e.g. layers x B x H)
        batch_slices = [getitem(stacked, index=(slice(None), j)) for j in range(n_per_batch)]
        buffers = torchify((reference,) * n_buffers, shared=True)
        del reference

        lock, empty, ready = mp.Lock(), mp.Queue(), mp.Queue()
        for index in range(n_buffers):
            empty.put(index)
        worker_ss = SeedSequence(entropy).spawn(n_actors)
        spawner = CloudpickleSpawner(factory)
        workers = Workers(
            mp,
            _pool_worker,
            [
                (
                    ss,
                    lock,
                    empty,
                    ready,
                    spawner,
                    buffers,
                    shared,
                    n_per_actor,
                    clone,
                    close,
                    sticky,
                    as_device(affinity[i]),
                    timeout,
                )
                for i, ss in enumerate(worker_ss)
            ],
            name="pool",
        ).start()
        try:
            while True:
                for j in range(n_per_batch):
                    index = workers.wait(
                        lambda slice_s: ready.get(timeout=slice_s),
                        timeout=timeout,
                        what="pool rollout: waiting for a fragment",
                    )
                    copy_(batch_slices[j], buffers[index])
                    empty.put(index)
                yield batch
                with locked(lock, wait=workers.wait, timeout=timeout, what="learner: shared actor lock"):
                    shared.load_state_dict(actor.state_dict(), strict=True)
        finally:
            workers.shutdown()
            for channel in (empty, ready):
                channel.close()
                channel.cancel_join_thread()

    return batches()
