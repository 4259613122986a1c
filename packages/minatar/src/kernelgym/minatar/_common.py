"""What the five MinAtar games share: params, action sets, sticky actions, specs, references.

Every game is one thread per env (``kernel_layout="env"``). A step is

1. the agent's action index, mapped through the game's minimal action set when
   ``minimal_action_set`` (MinAtar's gymnasium ``-v1`` ids) or taken as it is (``-v0``:
   all six actions ``n l u r d f`` = noop, left, up, right, down, fire);
2. sticky actions: one uniform draw from the env's stream, and with probability
   ``sticky_action_prob`` the previous action is repeated (MinAtar's ``Environment.act``);
3. the game's own rules (each game's ``play``), drawing from the same stream in the order
   the original draws from its ``numpy.random.RandomState``;
4. the observation, ``(10, 10, channels)`` bool in the original's channel order.

A game's rules live in ``@device_function`` helpers (``start``, ``play``, ``observe``)
that take the env's state arrays and an env index. Most are compiled once each as
functions of their own (``inline="never"``): inlined, a game's rules are copied into every
launcher and kit variant (one Seaquest make compiled for over 2 minutes, issue 28). A call
costs speed, though, so Asterix and Freeway inline ``observe``, which writes the whole
observation every step, and Breakout and SpaceInvaders, the two closest to the 10x-gymnax
bar, inline all three (the default). The bits are the same either way. The kernels call
them for env ``i``; the exact reference (`reference_for`) calls the very same helpers on a
batch of one env, binding their parameters BY NAME as the runtime does, so kernel and
reference agree bit for bit on cpu and sim. The independent check is the side-by-side test
against the original ``minatar`` package (tests/test_against_original.py).
"""

from __future__ import annotations

import dataclasses
import inspect

import numba
import numpy as np
from gymnasium import spaces

from kernelgym.core import device_function, rng
from kernelgym.envs.spec import CPUReference, EnvSpec

__all__ = ["GRID", "NO_BOUND", "NUM_ACTIONS", "MinAtarParams", "full_action", "make_specs", "reference_for", "sticky"]

GRID = 10  # every MinAtar game is a 10 x 10 grid
NUM_ACTIONS = 6  # n l u r d f
NOOP, LEFT, UP, RIGHT, DOWN, FIRE = range(NUM_ACTIONS)
# the upper bound (`StateArray.high`) of a counter no kernel indexes with: any int32 it holds
NO_BOUND = int(np.iinfo(np.int32).max)


@dataclasses.dataclass(frozen=True)
class MinAtarParams:
    """MinAtar's options (``minatar.Environment`` and its gymnasium wrapper), the same for every game.

    Attributes
    ----------
    sticky_action_prob : float
        Probability that the previous action is repeated instead of the chosen one.
    difficulty_ramping : bool
        Whether the game speeds up over an episode (Asterix, Seaquest, SpaceInvaders;
        Breakout and Freeway have no ramp and ignore it, as in the original).
    minimal_action_set : bool
        Actions index the game's minimal action set (the original's ``-v1`` ids) instead of
        all six actions (``-v0``).
    """

    sticky_action_prob: float = 0.1
    difficulty_ramping: bool = True
    minimal_action_set: bool = True

    def __post_init__(self):
        if not 0.0 <= self.sticky_action_prob <= 1.0:
            raise ValueError(
                f"MinAtarParams sticky_action_prob: expected a float in [0, 1], got {self.sticky_action_prob!r}"
            )


def action_mask(actions) -> int:
    """A minimal action set (a sequence of action numbers) as a bit mask."""
    return sum(1 << action for action in actions)


@numba.njit(inline="always", cache=True)
def full_action(index, minimal_action_set, mask):
    """The game action (0-5) of action ``index``: the ``index``-th action of ``mask`` when minimal."""
    if not minimal_action_set:
        return index
    seen = 0
    for action in range(NUM_ACTIONS):
        if mask & (1 << action):
            if seen == index:
                return action
            seen += 1
    return NOOP  # unreachable for a valid index: the runtime checks actions against the space


@device_function
def sticky(rng_states, i, action, last_action, sticky_action_prob):
    """The action played: ``last_action`` with probability ``sticky_action_prob``, else ``action``.

    Draws one uniform from stream ``i`` every step, as the original draws ``rand()`` every step.
    """
    if rng.uniform(rng_states, i) < sticky_action_prob:
        return last_action
    return action


@device_function
def clear_observation(i, obs):
    """Set env ``i``'s whole observation to False.

    The loops run to the array's own extents, not to the constant GRID: Numba indexes an
    array through its runtime shape, and only with loop bounds equal to that shape can LLVM
    see one contiguous block and clear it with wide stores (a memset) instead of one store
    per cell (3x faster on cpu; the bits are the same).
    """
    for y in range(obs.shape[1]):
        for x in range(obs.shape[2]):
            for channel in range(obs.shape[3]):
                obs[i, y, x, channel] = False


# ------------------------------------------------------------------ exact reference
def _call_by_name(function, values):
    """Call a device function or kernel body with its parameters looked up by name in ``values``."""
    py_func = getattr(function, "py_func", function)
    names = list(inspect.signature(py_func).parameters)
    body = getattr(function, "body", function)
    return body(*(values[name] for name in names))


def _params_values(params) -> dict:
    return {field.name: getattr(params, field.name) for field in dataclasses.fields(params)}


def _batch_of_one(state_arrays, state=None) -> dict[str, np.ndarray]:
    """Writable one-env batches of every state array (``state``'s values, else the initial ones)."""
    batch = {}
    for array in state_arrays:
        if state is None:
            batch[array.name] = np.full((1, *array.shape), array.initial, array.dtype)
        else:
            batch[array.name] = np.array(state[array.name], dtype=array.dtype)[np.newaxis].copy()
    return batch


def reference_for(state_arrays, step_kernel, reset_kernel, observe, channels) -> CPUReference:
    """The exact single-env reference of a game: its own rules on a batch of one env.

    Parameters
    ----------
    state_arrays : tuple of StateArray
    step_kernel, reset_kernel : EnvKernel
        The game's kernels; the reference runs their bodies for env 0 of a one-env batch.
    observe : device function
        ``observe(i, obs, <state names>)``.
    channels : int
    """

    def outputs(batch, params, rng_states, action=0):
        return {
            **batch,
            **_params_values(params),
            "i": 0,
            "rng_states": rng_states,
            "actions": np.array([action], np.int64),
            "obs": np.zeros((1, GRID, GRID, channels), np.bool_),
            "rewards": np.zeros(1, np.float32),
            "terminated": np.zeros(1, np.bool_),
        }

    def single(batch):
        return {name: value[0].copy() for name, value in batch.items()}

    def reset(params, rng_states):
        batch = _batch_of_one(state_arrays)
        _call_by_name(reset_kernel, outputs(batch, params, rng_states))
        return single(batch)

    def step(params, state, action, rng_states):
        batch = _batch_of_one(state_arrays, state)
        values = outputs(batch, params, rng_states, int(action))
        _call_by_name(step_kernel, values)
        return single(batch), float(values["rewards"][0]), bool(values["terminated"][0])

    def observe_state(params, state):
        batch = _batch_of_one(state_arrays, state)
        values = outputs(batch, params, None)
        _call_by_name(observe, values)
        return values["obs"][0]

    return CPUReference(reset=reset, step=step, observe=observe_state)


# ------------------------------------------------------------------ specs
def make_specs(name, channels, minimal_actions, **fields) -> tuple[EnvSpec, EnvSpec]:
    """The ``MinAtar-<name>-v1`` (minimal action set) and ``-v0`` (all six actions) specs of a game.

    ``fields`` are the remaining `EnvSpec` fields (state, kernels, reference, ...).
    """

    def action_space(params):
        return spaces.Discrete(len(minimal_actions) if params.minimal_action_set else NUM_ACTIONS)

    # gymnasium's stubs leave bool out of Box's dtypes; Box itself takes it
    common = dict(
        observation_space=spaces.Box(0, 1, (GRID, GRID, channels), np.bool_),  # type: ignore[arg-type]
        action_space=action_space,
        max_episode_steps=None,
        **fields,
    )
    description = fields.pop("description", "")
    common.pop("description", None)
    return (
        EnvSpec(
            id=f"MinAtar-{name}-v1",
            params=MinAtarParams(),
            description=f"{description} (MinAtar, minimal action set)",
            **common,
        ),
        EnvSpec(
            id=f"MinAtar-{name}-v0",
            params=MinAtarParams(minimal_action_set=False),
            description=f"{description} (MinAtar, all six actions)",
            **common,
        ),
    )
