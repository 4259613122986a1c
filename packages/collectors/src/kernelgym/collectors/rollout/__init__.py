"""Rollout engines (seed: rlplay): collect trajectory fragments from gymnasium envs.

In-process (:func:`inprocess.rollout`), double-buffered in one worker
(:func:`double.rollout`), a multi-actor buffer pool (:func:`pool.rollout`), whole
episodes (:func:`episodic.rollout`) and background evaluation
(:func:`evaluation.evaluate`), all built on :mod:`.core`.
"""

from . import double, episodic, evaluation, inprocess, pool
from .actor import Actor
from .batch import EnvList, VectorEnvBatch, as_batch, make_batch
from .core import collect, context, episode, evaluate, prepare, startup
from .nested import getitem, setitem, suply, tuply
from .shared import Aliased, aliased, numpify, torchify
from .state import Context, Fragment, State
from .workers import CloudpickleSpawner, WorkerError

__all__ = [
    "Actor",
    "CloudpickleSpawner",
    "WorkerError",
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
