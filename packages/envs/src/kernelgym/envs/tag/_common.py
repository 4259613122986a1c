"""What both Tag envs share: the phase contract, the game invariants, one-env batches.

A Tag step has phases that must not overlap: every agent moves, then every runner
checks the taggers' *new* positions, then every agent observes everyone's final
state. Each phase is a core ``@agent_kernel`` (one block per env and one thread per
agent on a GPU, a prange over envs on the cpu) that names only the runtime buffers,
state arrays and params it uses (`kernelgym.envs.runtime.names`); the spec's
``step_kernel`` is the tuple of phases and the runtime runs them in order with a barrier
between them (`kernelgym.core.bind_launches`: one launch with block barriers where an
env's agents fit one block, else one launch each), so no phase calls
``cuda.syncthreads`` itself and one source serves cpu, sim and cuda. Values that
several agents of an env write within a phase (tag counters, a tagger's reward) go
through ``atomic_add``.

The references are the plain single-env models: they run the rules agent by agent
with the very helpers the kernels call. Array helpers (observations, nearest tagger)
take ``(num_envs, num_agents)`` arrays and an env index, so a reference calls them on
its state as a batch of one env (`one_env`).

`check_game_invariants` holds the rules both games keep, whatever the moves.
"""

from __future__ import annotations

import numpy as np

__all__ = ["check_game_invariants", "one_env"]


def check_game_invariants(params, state) -> None:
    """What holds in every Tag state: taggers never leave, the runners count and time agree."""
    assert np.all(state["in_game"][: params.num_taggers]), "a tagger left the game"
    in_game_runners = int(state["in_game"][params.num_taggers :].sum())
    assert int(state["runners_left"]) == in_game_runners, (
        f"runners_left {int(state['runners_left'])} but {in_game_runners} runners are in the game"
    )
    assert 0 <= int(state["timestep"]) <= params.episode_length, f"timestep {state['timestep']} out of range"


def one_env(state: dict) -> dict[str, np.ndarray]:
    """A writable copy of a single-env state as a batch of one env (a leading axis of 1)."""
    return {name: np.array(value)[np.newaxis].copy() for name, value in state.items()}
