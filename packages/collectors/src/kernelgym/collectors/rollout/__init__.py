"""Rollout engines (seed: rlplay): collect trajectory fragments from gymnasium envs.

In-process (`inprocess.rollout`), double-buffered in one worker
(`double.rollout`), a multi-actor buffer pool (`pool.rollout`), whole
episodes (`episodic.rollout`) and background evaluation
(`evaluation.evaluate`), all built on `core`.

Example: two worker processes, each stepping one vector env of 4096 CartPoles::

    import kernelgym.envs as kge
    from kernelgym.collectors.rollout import Actor, pool

    def factory(seed=None):
        return kge.make("CartPole-v1", num_envs=4096, backend="cpu", seed=seed,
                        autoreset_mode="same_step")

    batches = pool.rollout(factory, actor, n_steps=64, n_actors=2, n_per_actor=4096,
                           n_buffers=4, n_per_batch=2, entropy=0)
    for batch in batches:          # 65 x 8192 records, overwritten by the next one
        learn(batch.state.obs, batch.state.act, batch.state.rew,
              batch.state.terminated, batch.state.truncated, batch.env["final_obs"])
        if done:
            break                  # workers are stopped, no process is left behind

``actor`` subclasses `Actor` (``step(stepno, obs, act, rew, fin, *, hx,
virtual)``). The multi-process engines raise the errors of
`kernelgym.collectors.worker_errors`: a worker that raised,
`WorkerError` with its ``remote_traceback``; one that was
killed or exited, `WorkerCrashedError` (``exitcode``,
``signal``); a silent one, `WorkerTimeoutError` (a
``TimeoutError``) after ``timeout`` seconds.
"""

from . import double, episodic, evaluation, inprocess, pool
from .actor import Actor
from .batch import EnvList, VectorEnvBatch, as_batch, make_batch
from .core import collect, context, episode, evaluate, prepare, startup
from .nested import getitem, setitem, suply, tuply
from .shared import Aliased, aliased, numpify, torchify
from .state import Context, Fragment, State
from .workers import CloudpickleSpawner

__all__ = [
    "Actor",
    "CloudpickleSpawner",
    "double",
    "episodic",
    "evaluation",
    "inprocess",
    "pool",
    "Aliased",
    "Context",
    "EnvList",
    "Fragment",
    "State",
    "VectorEnvBatch",
    "aliased",
    "as_batch",
    "collect",
    "context",
    "episode",
    "evaluate",
    "getitem",
    "make_batch",
    "numpify",
    "prepare",
    "setitem",
    "startup",
    "suply",
    "torchify",
    "tuply",
]
