"""Hypothesis strategies for property-testing an env: seeds, batch sizes, actions, states.

Everything here depends only on gymnasium spaces, numpy and the CPU reference, so the
strategies can be used on their own in an author's tests::

    from kernelgym.envs.testing import strategies as kst

    @given(actions=kst.batch_actions(env.single_action_space, num_envs=8))
    def test_my_env(actions): ...
"""

from __future__ import annotations

import dataclasses
import functools
from typing import cast

import numpy as np
from gymnasium import spaces
from hypothesis import strategies as st

from kernelgym.core import rng
from kernelgym.envs.observations import space_shape
from kernelgym.envs.runtime.streams import per_agent_streams
from kernelgym.envs.spec import reference_reset

__all__ = [
    "Batch",
    "InvalidAction",
    "NUM_ENVS",
    "actions",
    "batch_actions",
    "batches",
    "invalid_actions",
    "num_envs",
    "param_overrides",
    "random_actions",
    "range_values",
    "reached_states",
    "seeds",
    "states",
]

# Batch sizes the kit draws: 1, primes, and sizes around the 128-thread CUDA block
# (a size that is not a multiple of the block leaves a partly idle last block).
NUM_ENVS = {
    "cpu": (1, 2, 3, 5, 7, 13, 31, 127, 129),
    "cuda": (1, 2, 3, 5, 7, 13, 31, 127, 129, 257),
    # every simulated thread runs as Python: keep batches small
    "sim": (1, 2, 3, 5, 7),
}
# Stand-in bounds for a Box with infinite limits: the kit draws finite actions there.
_UNBOUNDED_ACTION = 1e3
# At most this many distinct states per batch; larger batches repeat them (cheap to shrink).
_DISTINCT_STATES = 8


def seeds() -> st.SearchStrategy[int]:
    """Seeds accepted by ``make(..., seed=)`` and ``env.reset(seed=)``."""
    return st.integers(0, 2**32 - 1)


def num_envs(backend: str = "cpu", min_value: int = 1) -> st.SearchStrategy[int]:
    """Batch sizes for ``backend``: 1, primes, and sizes that are no multiple of the block size."""
    if backend not in NUM_ENVS:
        raise ValueError(f"backend: expected one of {sorted(NUM_ENVS)}, got {backend!r}")
    choices = [n for n in NUM_ENVS[backend] if n >= min_value]
    if not choices:
        raise ValueError(f"min_value: expected at most {max(NUM_ENVS[backend])}, got {min_value}")
    return st.sampled_from(choices)


def range_values(low, high) -> st.SearchStrategy:
    """Values in ``[low, high]`` (ints for int ends), the ends drawn as often as the inside."""
    ends = st.sampled_from([low, high])
    if isinstance(low, int):
        return st.one_of(ends, st.integers(low, high))
    return st.one_of(ends, st.floats(low, high, allow_nan=False))


def param_overrides(spec, fixed=()) -> st.SearchStrategy[dict]:
    """Params overrides drawn from the spec's `EnvSpec.param_ranges` (fields in ``fixed`` left out).

    A `EnvSpec.per_env_params` field is drawn anywhere in its range, ends included; any
    other field is a compile-time constant of the kernels, so each of its values costs a
    compilation: at most one of them is drawn per example, at one end of its range (the
    others keep their defaults). The empty dict (every default) is the shrink target.
    """
    ranges = {name: bounds for name, bounds in spec.param_ranges.items() if name not in fixed}
    runtime = {name: range_values(*bounds) for name, bounds in ranges.items() if name in spec.per_env_params}
    compiled = [(name, end) for name, bounds in ranges.items() if name not in spec.per_env_params for end in bounds]

    @st.composite
    def build(draw) -> dict:
        drawn = {}
        for name, values in runtime.items():
            if draw(st.booleans(), label=f"draw {name}"):
                drawn[name] = draw(values, label=name)
        if compiled and draw(st.booleans(), label="draw a compiled param"):
            name, end = draw(st.sampled_from(compiled), label="compiled param at an end")
            drawn[name] = end
        return drawn

    return build()


# ------------------------------------------------------------------------- actions
def _box_bounds(space: spaces.Box):
    low = np.where(np.isfinite(space.low), space.low, -_UNBOUNDED_ACTION).astype(np.float64)
    high = np.where(np.isfinite(space.high), space.high, _UNBOUNDED_ACTION).astype(np.float64)
    return low, high


def actions(space: spaces.Space) -> st.SearchStrategy[np.ndarray]:
    """One agent's valid action as a numpy array of the space's dtype and shape."""
    if isinstance(space, spaces.Discrete):
        start = int(space.start)
        return st.integers(start, start + int(space.n) - 1).map(lambda a: np.array(a, dtype=np.int64))
    if isinstance(space, spaces.MultiDiscrete):
        starts = np.asarray(space.start, dtype=np.int64).reshape(-1)
        sizes = np.asarray(space.nvec, dtype=np.int64).reshape(-1)
        parts = [st.integers(int(s), int(s + n - 1)) for s, n in zip(starts, sizes)]
        return st.tuples(*parts).map(lambda a: np.array(a, dtype=np.int64).reshape(space.shape))
    if isinstance(space, spaces.MultiBinary):
        size = int(np.prod(space.shape))
        return st.lists(st.integers(0, 1), min_size=size, max_size=size).map(
            lambda a: np.array(a, dtype=space.dtype).reshape(space.shape)
        )
    if isinstance(space, spaces.Box):
        low, high = _box_bounds(space)
        width = 32 if space.dtype == np.float32 else 64
        parts = [
            st.floats(float(lo), float(hi), width=width, allow_nan=False)
            for lo, hi in zip(low.reshape(-1), high.reshape(-1))
        ]
        return st.tuples(*parts).map(lambda a: np.array(a, dtype=space.dtype).reshape(space.shape))
    raise TypeError(f"space: expected Discrete, MultiDiscrete, MultiBinary or Box, got {space}")


def batch_actions(space: spaces.Space, num_envs: int, num_agents: int = 1) -> st.SearchStrategy[np.ndarray]:
    """Valid actions for a whole batch: shape ``(num_envs, [num_agents,] *space.shape)``."""
    agents = (num_agents,) if num_agents > 1 else ()
    count = num_envs * (num_agents if agents else 1)
    shape = (num_envs, *agents, *space_shape(space))
    return st.lists(actions(space), min_size=count, max_size=count).map(
        lambda items: np.stack(items).astype(_action_dtype(space)).reshape(shape)
    )


def random_actions(space: spaces.Space, shape_prefix: tuple, generator: np.random.Generator) -> np.ndarray:
    """Valid actions of shape ``(*shape_prefix, *space.shape)`` drawn with a numpy Generator.

    Used for long rollouts, where one hypothesis draw per action would only slow shrinking.
    """
    if isinstance(space, spaces.Discrete):
        return generator.integers(space.start, space.start + space.n, size=shape_prefix, dtype=np.int64)
    if isinstance(space, spaces.MultiDiscrete):
        start = np.asarray(space.start, dtype=np.int64)
        return start + generator.integers(0, space.nvec, size=(*shape_prefix, *space.shape), dtype=np.int64)
    if isinstance(space, spaces.MultiBinary):
        return generator.integers(0, 2, size=(*shape_prefix, *space.shape)).astype(space.dtype)
    box = cast(spaces.Box, space)  # the actions a kernelgym env accepts: the last kind is a Box
    low, high = _box_bounds(box)
    return generator.uniform(low, high, size=(*shape_prefix, *space_shape(box))).astype(box.dtype)


def _action_dtype(space) -> np.dtype:
    return np.dtype(np.int64) if isinstance(space, (spaces.Discrete, spaces.MultiDiscrete)) else space.dtype


@dataclasses.dataclass(frozen=True)
class InvalidAction:
    """A batch of actions the env must refuse (or clip).

    Attributes
    ----------
    kind : str
        ``"out_of_range"``, ``"wrong_dtype"``, ``"wrong_shape"`` or ``"non_finite"``.
    actions : numpy.ndarray
    expected : type or str
        The exception type ``step`` must raise, or ``"clip"`` where the documented
        behaviour is to clip (a finite Box action outside its bounds).
    """

    kind: str
    actions: np.ndarray
    expected: object


def invalid_actions(space: spaces.Space, num_envs: int, num_agents: int = 1) -> st.SearchStrategy[InvalidAction]:
    """Bad action batches: out of range, wrong dtype, wrong shape, NaN and infinity."""
    agents = (num_agents,) if num_agents > 1 else ()
    shape = (num_envs, *agents, *space_shape(space))
    valid = batch_actions(space, num_envs, num_agents)
    discrete = isinstance(space, (spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary))
    size = int(np.prod(shape))

    def poke(batch: np.ndarray, position: int, value) -> np.ndarray:
        batch = batch.copy().reshape(-1)
        batch[position] = value
        return batch.reshape(shape)

    position = st.integers(0, size - 1)
    if discrete:
        if isinstance(space, spaces.Discrete):
            lows = np.full(size, int(space.start))
            highs = np.full(size, int(space.start + space.n - 1))
        elif isinstance(space, spaces.MultiBinary):
            lows, highs = np.zeros(size, np.int64), np.ones(size, np.int64)
        else:
            multi = cast(spaces.MultiDiscrete, space)  # the one discrete kind left
            lows = np.broadcast_to(np.asarray(multi.start, np.int64), shape).reshape(-1)
            highs = lows + np.broadcast_to(np.asarray(multi.nvec, np.int64), shape).reshape(-1) - 1

        def out_of_range(batch, where, below, distance):
            value = lows[where] - distance if below else highs[where] + distance
            return InvalidAction("out_of_range", poke(batch, where, value), ValueError)

        # a value the actions' dtype holds (MultiBinary's is int8): out of the space, not a wrapped cast
        limits = np.iinfo(_action_dtype(space))
        farthest = min(2**31, int(limits.max) - int(highs.max()), int(lows.min()) - int(limits.min))
        out = st.builds(out_of_range, valid, position, st.booleans(), st.integers(1, farthest))
        non_finite = st.builds(
            lambda batch, where, value: InvalidAction(
                "non_finite", poke(batch.astype(np.float32), where, value), TypeError
            ),
            valid,
            position,
            st.sampled_from([np.nan, np.inf, -np.inf]),
        )
        wrong_dtype = st.builds(
            lambda batch, dtype: InvalidAction("wrong_dtype", batch.astype(dtype), TypeError),
            valid,
            st.sampled_from([np.float32, np.float64, np.bool_]),
        )
    else:
        box = cast(spaces.Box, space)  # the one continuous kind
        lows = np.broadcast_to(box.low, shape).reshape(-1).astype(np.float64)
        highs = np.broadcast_to(box.high, shape).reshape(-1).astype(np.float64)
        # only a finite bound can be stepped over
        sides = [(where, True) for where in np.flatnonzero(np.isfinite(lows))]
        sides += [(where, False) for where in np.flatnonzero(np.isfinite(highs))]

        def out_of_bounds(batch, side, distance):
            where, below = side
            value = lows[where] - distance if below else highs[where] + distance
            return InvalidAction("out_of_range", poke(batch, int(where), value), "clip")

        out = st.builds(out_of_bounds, valid, st.sampled_from(sides), st.floats(1e-3, 1e3)) if sides else st.nothing()
        non_finite = st.builds(
            lambda batch, where, value: InvalidAction("non_finite", poke(batch, where, value), ValueError),
            valid,
            position,
            st.sampled_from([np.nan, np.inf, -np.inf]),
        )
        wrong_dtype = st.builds(
            lambda batch, dtype: InvalidAction("wrong_dtype", batch.astype(dtype), TypeError),
            valid,
            st.sampled_from([np.int64, np.int32, np.bool_]),
        )

    def reshape(batch, change):
        if change == "drop_env":
            bad = batch[:-1] if num_envs > 1 else batch[:0]
        elif change == "extra_env":
            bad = np.concatenate([batch, batch[:1]])
        elif change == "extra_axis":
            # two entries, not one: (num_envs, 1) is a valid Discrete batch (SB3 and skrl's shape)
            bad = np.stack([batch, batch], axis=-1)
        else:  # "flat": the batch without its leading axes
            bad = batch.reshape(-1)[:1].reshape(())
        return InvalidAction("wrong_shape", bad, ValueError)

    wrong_shape = st.builds(reshape, valid, st.sampled_from(["drop_env", "extra_env", "extra_axis", "flat"]))
    return st.one_of(out, wrong_dtype, wrong_shape, non_finite)


# -------------------------------------------------------------------------- states
def reached_states(
    reference, params, action_space: spaces.Space, num_agents: int = 1, max_steps: int = 40, num_streams: int = 1
) -> st.SearchStrategy[dict]:
    """Single-env states reached by a random rollout of the CPU reference.

    A rollout starts from ``reference.reset`` and takes up to ``max_steps`` random
    valid actions; an episode that terminates starts over, as autoreset would, so every
    state is one an agent can meet. Shrinks towards fewer steps and smaller seeds.
    ``num_streams`` is how many RNG streams the reference draws from (``num_agents`` for
    an agent-layout env: `kernelgym.envs.runtime.streams`).
    """
    agents = (num_agents,) if num_agents > 1 else ()

    def reference_rollout(seed: int, steps: int) -> dict:
        generator = np.random.default_rng(seed)  # the actions
        # the env's own randomness, as the reference draws it: one stream, or one per agent
        stream = rng.seed_streams(seed, num_streams)
        state = reference.reset(params, stream)
        for _ in range(steps):
            action = random_actions(action_space, agents, generator)
            state, _, terminated = reference.step(params, state, action, stream)
            if terminated:
                state = reference.reset(params, stream)
        return state

    return st.builds(reference_rollout, seeds(), st.integers(0, max_steps))


def states(spec, params, reference=None) -> st.SearchStrategy[dict]:
    """Single-env state dicts: the spec's ``state_strategy`` and states reached by rollouts.

    Parameters
    ----------
    spec : EnvSpec
    params : the env's params record (``spec.params`` or overrides)
    reference : CPUReference, optional
        Defaults to ``spec.load("reference")``.
    """
    reference = spec.load("reference") if reference is None else reference
    # rollouts start from the reference's reset with any keep_on_reset arrays at their initial values
    reference = reference._replace(reset=functools.partial(reference_reset, spec, reference.reset))
    resolved = spec.resolve(params)
    num_streams = resolved.num_agents if per_agent_streams(spec) else 1
    reached = reached_states(reference, params, resolved.action_space, resolved.num_agents, num_streams=num_streams)
    provided = spec.load("state_strategy")
    if provided is None:
        return reached
    # The author's strategy reaches corners (thresholds, walls); rollouts keep the mix honest.
    return st.one_of(provided(params), reached)


@dataclasses.dataclass(frozen=True)
class Batch:
    """One step's worth of input for a batch of envs.

    Attributes
    ----------
    states : tuple of dict
        One state dict per env.
    actions : numpy.ndarray
        ``(num_envs, [num_agents,] *action_shape)``.
    pending : tuple of bool
        Whether env ``i`` is flagged for an autoreset (its previous step ended the
        episode), so the step runs its reset branch.
    """

    states: tuple
    actions: np.ndarray
    pending: tuple

    @property
    def num_envs(self) -> int:
        return len(self.states)

    def replace(self, index: int, state: dict, action: np.ndarray, pending: bool) -> Batch:
        """A copy with env ``index`` given another state, action and pending flag."""
        new_states = list(self.states)
        new_states[index] = state
        new_actions = self.actions.copy()
        new_actions[index] = action
        new_pending = list(self.pending)
        new_pending[index] = pending
        return Batch(tuple(new_states), new_actions, tuple(new_pending))


def batches(spec, params, backend: str = "cpu", min_envs: int = 1, state_strategy=None) -> st.SearchStrategy[Batch]:
    """Batches of envs with states, valid actions and pending resets.

    At most eight distinct states are drawn; a larger batch repeats them in turn, which
    keeps examples small and shrinking quick while still filling a whole block. The
    states come from ``state_strategy``, default `states` of the spec.
    """
    resolved = spec.resolve(params)
    state_strategy = states(spec, params) if state_strategy is None else state_strategy

    @st.composite
    def build(draw) -> Batch:
        count = draw(num_envs(backend, min_envs))
        distinct = draw(st.lists(state_strategy, min_size=1, max_size=min(count, _DISTINCT_STATES)))
        batch_states = tuple(distinct[i % len(distinct)] for i in range(count))
        batch = draw(batch_actions(resolved.action_space, count, resolved.num_agents))
        pending = tuple(draw(st.lists(st.booleans(), min_size=count, max_size=count)))
        return Batch(batch_states, batch, pending)

    return build()
