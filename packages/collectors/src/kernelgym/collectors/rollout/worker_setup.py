"""How the multi-process engines (double, pool, evaluation) set up both sides.

The learner moves a copy of its actor to shared memory and learns the fragment shapes
(`shared_reference`); each worker takes a private copy of that actor and makes
its envs, seeded from its own ``SeedSequence`` (`worker_setup`, `env_seeds`).
"""

from __future__ import annotations

from copy import deepcopy

import torch
from numpy.random import SeedSequence

from .batch import make_batch
from .core import prepare

__all__ = ["env_seeds", "shared_reference", "worker_setup"]


def env_seeds(ss: SeedSequence, n_envs: int) -> list[int]:
    """One integer seed per env, spawned from ``ss``."""
    return [int(child.generate_state(1)[0]) for child in ss.spawn(n_envs)]


def worker_setup(ss: SeedSequence, factory, n_envs: int, shared, clone: bool, device):
    """A worker's actor and envs, seeded from ``ss``.

    The actor is a private copy of the shared one (``clone``) or the shared module
    itself; torch's generator and the ``n_envs`` envs get seeds spawned from ``ss``.
    """
    torch.set_num_threads(1)  # one core per worker process
    torch.manual_seed(int(ss.generate_state(1)[0]))
    actor = deepcopy(shared).to(device) if clone else shared
    return actor, make_batch(factory, n_envs, env_seeds(ss, n_envs))


def shared_reference(factory, actor, n_steps: int, n_envs: int, close: bool):
    """The learner's side: the actor moved to shared memory for the workers, and a
    fragment of the right shapes for their buffers (from one env made with ``seed=None``)."""
    shared = deepcopy(actor).cpu().share_memory()
    env = factory(seed=None)
    reference = prepare(env, shared, n_steps, n_envs)
    if close:
        env.close()
    return shared, reference
