"""Step kernelgym's MinAtar games and the original ``minatar`` package side by side.

The original draws its randomness from a ``numpy.random.RandomState``. `StreamDraws`
stands in for it and returns, in order, the numbers kernelgym's stream for that env
draws (``rand`` is ``rng.uniform``, ``randint(n)`` is ``rng.randint``). Given the same
actions, the original and the kernel then play the very same game, and every
observation, reward and terminal flag must be identical (`compare`).

The original is imported only when `compare` runs: it is a test-time dependency
(``pip install --no-deps minatar==1.0.15``), never part of this package.

One difference is by design: the original's ``Environment.reset`` keeps the last
action for the sticky-action rule across episodes, kernelgym starts every episode
with action 0 (its reset must not depend on the previous episode, and the property
kit's exact reference resets from nothing). `compare` sets the original's
``last_action`` to 0 at each reset, so the rest is compared exactly.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from kernelgym.core import rng

__all__ = ["GAMES", "Mismatch", "StreamDraws", "compare"]

# kernelgym game name -> the original's module name
GAMES = {
    "Asterix": "asterix",
    "Breakout": "breakout",
    "Freeway": "freeway",
    "Seaquest": "seaquest",
    "SpaceInvaders": "space_invaders",
}


class StreamDraws:
    """A stand-in for the original's ``numpy.random.RandomState``: kernelgym's draws, in order.

    Parameters
    ----------
    stream : numpy.ndarray
        One env's ``(1, 2)`` uint64 stream (copied; the copy advances as it is drawn from).
    """

    def __init__(self, stream):
        self.stream = np.array(stream, dtype=np.uint64).reshape(1, 2).copy()
        self.draws = 0

    def rand(self, *size):
        """Uniforms in [0, 1): a float, or an array of shape ``size``."""
        if not size:
            self.draws += 1
            return rng.uniform(self.stream, 0)
        return np.array([self.rand() for _ in range(int(np.prod(size)))]).reshape(size)

    def randint(self, low, high=None, size=None):
        """Integers in ``[low, high)`` (``[0, low)`` without ``high``): an int, or an array of ``size``."""
        if high is None:
            low, high = 0, low
        if size is not None:
            return np.array([self.randint(low, high) for _ in range(int(np.prod(size)))]).reshape(size)
        self.draws += 1
        return int(low + rng.randint(self.stream, 0, high - low))


@dataclasses.dataclass
class Mismatch:
    """Where kernelgym and the original first disagreed."""

    env: int
    step: int
    what: str
    kernelgym: object
    original: object

    def __str__(self):
        return (
            f"env {self.env}, step {self.step}: {self.what} differs: kernelgym {self.kernelgym!r}, "
            f"original {self.original!r}"
        )


def _original(game, stream, sticky_action_prob, difficulty_ramping):
    from minatar import Environment  # the test-time dependency, imported only here

    original = Environment(GAMES[game], sticky_action_prob=sticky_action_prob, difficulty_ramping=difficulty_ramping)
    draws = StreamDraws(stream)
    original.random = original.env.random = draws
    original.reset()  # the constructor's reset drew from its own RandomState: reset again from ours
    return original


def compare(
    game: str,
    actions: np.ndarray,
    seed: int,
    *,
    sticky_action_prob: float = 0.1,
    difficulty_ramping: bool = True,
    minimal_action_set: bool = True,
    backend: str = "cpu",
    original_seed: int | None = None,
) -> tuple[Mismatch | None, dict]:
    """Play ``actions`` ``(steps, num_envs)`` in kernelgym and in the original, env by env.

    Parameters
    ----------
    game : str
        A key of `GAMES`.
    actions : numpy.ndarray
        Action indices into the env's action space, one row per step.
    seed : int
        kernelgym's seed; env ``k`` of the original draws from stream ``k`` of it.
    original_seed : int, optional
        Seed the original's streams differently (a comparison that must fail).

    Returns
    -------
    mismatch, counts
        The first disagreement (None if every observation, reward and terminal flag was
        identical) and ``{"transitions", "episodes", "draws"}`` counted over all envs.
    """
    import kernelgym.envs as kge

    if game not in GAMES:
        raise ValueError(f"game: expected one of {sorted(GAMES)}, got {game!r}")
    actions = np.asarray(actions, dtype=np.int64)
    if actions.ndim != 2:
        raise ValueError(f"actions: expected shape (steps, num_envs), got {actions.shape}")
    steps, num_envs = actions.shape
    env = kge.make(
        f"MinAtar-{game}-v1",
        num_envs,
        backend=backend,
        seed=seed,
        sticky_action_prob=sticky_action_prob,
        difficulty_ramping=difficulty_ramping,
        minimal_action_set=minimal_action_set,
    )
    try:
        obs, _ = env.reset(seed=seed, numpy=True)
        streams = rng.seed_streams(seed if original_seed is None else original_seed, num_envs)
        originals = [_original(game, streams[k], sticky_action_prob, difficulty_ramping) for k in range(num_envs)]
        action_sets = [o.minimal_action_set() if minimal_action_set else list(range(6)) for o in originals]
        counts = {"transitions": 0, "episodes": 0}
        for k, original in enumerate(originals):
            if not np.array_equal(obs[k], original.state()):
                return Mismatch(k, 0, "reset observation", obs[k].nonzero(), original.state().nonzero()), counts
        done = np.zeros(num_envs, bool)
        for t in range(steps):
            obs, rewards, terminated, truncated, _ = env.step(actions[t], numpy=True)
            for k, original in enumerate(originals):
                if done[k]:  # kernelgym's NEXT_STEP autoreset: this step resets env k
                    original.last_action = 0
                    original.reset()
                    counts["episodes"] += 1
                    reward, terminal = 0, False
                else:
                    reward, terminal = original.act(action_sets[k][actions[t, k]])
                    counts["transitions"] += 1
                state = original.state()
                for what, ours, theirs in (
                    ("terminated", bool(terminated[k]), bool(terminal)),
                    ("reward", float(rewards[k]), float(reward)),
                    ("truncated", bool(truncated[k]), False),
                ):
                    if ours != theirs:
                        return Mismatch(k, t + 1, what, ours, theirs), counts
                if not np.array_equal(obs[k], state):
                    diff = np.argwhere(obs[k] != state)
                    return Mismatch(
                        k, t + 1, "observation (y, x, channel) cells", diff.tolist(), state[tuple(diff.T)].tolist()
                    ), counts
            done = terminated.copy()
        counts["draws"] = sum(o.random.draws for o in originals)
        return None, counts
    finally:
        env.close()
