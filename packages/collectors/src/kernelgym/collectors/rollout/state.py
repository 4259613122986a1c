"""The records a rollout is made of: State, Fragment and Context."""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["State", "Fragment", "Context"]


class State(NamedTuple):
    """What the actor sees at time ``t``: $(t, x_t, a_{t-1}, r_t, d_t)$.

    Attributes
    ----------
    stepno : int64, the step number within the current episode (0 right after a reset).
    obs : the observation $x_t$ (nested), already the reset observation $x_*$ when
        ``fin`` is set.
    act : the action $a_{t-1}$ that led here (nested).
    rew : float32, the reward $r_t$ of that transition.
    fin : bool, ``terminated | truncated``: the transition into ``t`` ended an episode
        (also set on the very first record after ``startup``, a fresh episode that no
        transition ended: there ``terminated`` and ``truncated`` are unset).
    terminated : bool, the episode reached a terminal state (no bootstrapping).
    truncated : bool, the episode was cut short, e.g. by a time limit (bootstrap from
        the final observation, which the fragment keeps in ``env["final_obs"]``).
    """

    stepno: Any
    obs: Any
    act: Any
    rew: Any
    fin: Any
    terminated: Any
    truncated: Any


class Fragment(NamedTuple):
    """A trajectory fragment: ``state`` and ``actor`` are ``(1 + T) x B x ...``,
    ``env`` is ``T x B x ...`` (``env["final_obs"][t]`` is the observation the step
    from ``t`` to ``t + 1`` emitted, before any reset) and ``hx`` is the actor's
    recurrent state at ``t = 0``."""

    state: State
    actor: Any
    env: Any
    hx: Any


class Context(NamedTuple):
    """The running ``1 x B x ...`` state between fragments: ``state`` at time ``t``,
    the actor's recurrent state ``hx`` $h_t$ and ``original_obs``, the most recent
    observation before any automatic reset."""

    state: State
    hx: Any
    original_obs: Any
