"""Background evaluation: a worker plays test episodes with the latest parameters.

The worker plays one episode in each of its envs, then waits for a request; the
learner's ``next()`` publishes its current parameters, asks for the result and
receives the returns of the episodes played since the previous request (with the
parameters published then), so evaluation overlaps training.
"""

from __future__ import annotations

from collections.abc import Iterator
from copy import deepcopy

import numpy
from numpy.random import SeedSequence

from .core import as_device, check_positive, check_timeout
from .core import evaluate as evaluate_in_process
from .worker_setup import worker_setup
from .workers import (
    CloudpickleSpawner,
    Workers,
    connection_receiver,
    get_context,
    locked,
    worker_check,
    worker_wait,
)

__all__ = ["evaluate"]


def _evaluation_worker(stop, ss, lock, conn, factory, shared, n_envs, n_steps, clone, close, device, timeout):
    actor, batch = worker_setup(ss, factory, n_envs, shared, clone, device)
    check = worker_check(stop)
    try:
        while True:
            if actor is not shared:
                with locked(lock, timeout=timeout, check=check, what="evaluation worker: shared actor lock"):
                    actor.load_state_dict(shared.state_dict(), strict=True)
            returns = evaluate_in_process(batch, actor, n_steps=n_steps, device=device)
            worker_wait(connection_receiver(conn), stop)  # a request
            conn.send(returns)
    finally:
        conn.close()
        if close:
            batch.close()


def evaluate(
    factory,
    actor,
    n_envs: int = 4,
    n_steps: int | None = None,
    *,
    clone: bool = True,
    close: bool = True,
    start_method: str | None = "forkserver",
    timeout: float = 10.0,
    affinity=None,
    entropy=None,
) -> Iterator[numpy.ndarray]:
    """Yield, on every ``next()``, the returns (``(n_envs,)`` float64) of one
    episode per env played in a background worker process.

    Parameters
    ----------
    factory : callable ``factory(seed=int)``, see `rollout`.
    actor : Actor, its parameters are published to the worker on every ``next()``.
    n_envs : int, test envs.
    n_steps : int or None, the longest episode played (None: until every env ends).
    clone, close, start_method, timeout, affinity, entropy : see `rollout`.
    """
    check_positive("n_envs", n_envs)
    if n_steps is not None:
        check_positive("n_steps", n_steps)
    check_timeout(timeout)
    mp = get_context(start_method)

    def results():
        shared = deepcopy(actor).cpu().share_memory()
        lock = mp.Lock()
        learner_end, worker_end = mp.Pipe()
        workers = Workers(
            mp,
            _evaluation_worker,
            [
                (
                    SeedSequence(entropy),
                    lock,
                    worker_end,
                    CloudpickleSpawner(factory),
                    shared,
                    n_envs,
                    n_steps,
                    clone,
                    close,
                    as_device(affinity),
                    timeout,
                )
            ],
            name="evaluation",
        ).start()
        worker_end.close()  # the worker holds its own copy of this end
        try:
            while True:
                with locked(lock, wait=workers.wait, timeout=timeout, what="learner: shared actor lock"):
                    shared.load_state_dict(actor.state_dict(), strict=True)
                try:
                    learner_end.send(True)
                except OSError:  # a broken pipe: the worker is gone, say why
                    workers.processes[0].join(timeout)
                    workers.check()
                    raise
                yield workers.wait(
                    connection_receiver(learner_end), timeout=timeout, what="evaluation: waiting for returns"
                )
        finally:
            workers.shutdown()
            learner_end.close()

    return results()
