"""How an environment declares itself: `EnvSpec`, `StateArray` and `CPUReference`.

An env module builds one frozen `EnvSpec` and returns it from the
``kernelgym_register_envs`` hook (see `kernelgym.envs.hookspecs`). The spec holds its
kernels, reference, renderer and property-test helpers as objects, or as
``"module:attr"`` strings loaded on first use by `EnvSpec.load` (lazy loading).

Kernel contract: arguments by NAME
----------------------------------
A ``kernel_layout="env"`` kernel is a core ``@env_kernel`` whose body is
``body(i, <names>)``; a ``kernel_layout="agent"`` kernel an ``@agent_kernel``
``body(env, agent, num_agents, <names>)``. The names, in any order and any subset,
are matched once when the env is made (an unknown name is an error naming the
kernel, the parameter and every available name):

- the runtime's buffers (`kernelgym.envs.runtime.RUNTIME_NAMES`): ``actions``, ``obs``,
  ``rewards`` (float32; ``(num_envs, num_agents)`` for multi-agent envs),
  ``terminated`` (bool, per env) and ``rng_states`` (uint64 streams of
  ``kernelgym.core.rng``: ``(num_envs, 2)`` for env-layout kernels, env ``i`` draws only
  from stream ``i``; ``(num_envs * num_agents, 2)`` for agent-layout kernels, one stream
  per (env, agent): agent ``a`` of env ``i`` draws only from stream
  ``rng.agent_stream(i, a, num_agents)``, never from another agent's, since an env's
  agent threads run concurrently on a GPU; see `kernelgym.envs.runtime.streams`);
- for a ``Dict``/``Tuple`` observation space, one buffer per leaf instead of ``obs``,
  named by its key path: ``obs_<key>``, ``obs_<outer>_<inner>``, ``obs_<index>``
  (`kernelgym.envs.observations`);
- each `StateArray` by its name, ``(num_envs, *shape)`` or ``(num_envs, num_agents, *shape)``;
- each params field by its field name, as a scalar (for `EnvSpec.per_env_params` fields,
  the env's own value, read from the runtime's per-env table), or, for an array-valued
  field, as one read-only array shared by every env (a constant table).

``step`` advances env ``i`` and writes ``obs[i]``, ``rewards[i]`` and
``terminated[i]``; it has no reset branch. ``reset`` draws a fresh start state for
env ``i`` and writes ``obs[i]``; it takes only what it uses. The runtime owns the rest:
which envs reset (NEXT_STEP or SAME_STEP autoreset), rewards 0 and flags False after a
reset, the time limit (``truncated``), the episode step counter and the SAME_STEP
final observation, composed with the env's kernels into one launch per step. An
agent-layout env may give a tuple of agent kernels (phases, run in order with a
barrier over the env's agents between them: one launch with block barriers where the
env's agents fit one block, else one launch per phase). An env that also counts the steps of
its episode in a state array names that array in ``EnvSpec.episode_step``, so that
``set_state`` starts the runtime's counter from the same value.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from gymnasium import spaces

from kernelgym.envs.observations import check_observation_space

__all__ = [
    "CPUReference",
    "EnvSpec",
    "PRECISIONS",
    "StateArray",
    "load_reference",
    "reference_reset",
    "resolve_precision",
    "validate_params",
]

KERNEL_LAYOUTS = ("env", "agent")
ACTION_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)
# The arithmetic an env's kernels may be compiled for, by name (see `EnvSpec.precisions`).
PRECISIONS = {"float64": np.float64, "float32": np.float32}
# The spec fields that may name an object lazily as "module:attr".
LAZY_FIELDS = ("step_kernel", "reset_kernel", "reference", "render", "state_strategy", "invariants")


class CPUReference(NamedTuple):
    """The plain single-env model of an env, the exact ground truth for parity tests.

    A state is a dict ``{name: np.ndarray}`` holding one env's slice of every
    `StateArray` (shape ``shape`` or ``(num_agents, *shape)``). Randomness comes from
    ``kernelgym.core.rng`` on the env's own stream: ``rng_states`` is a ``(1, 2)``
    uint64 array holding that stream (draw with ``rng.uniform(rng_states, 0)``, ...;
    the draws advance it in place), so the reference draws exactly what the kernel
    draws. For an agent-layout env it holds the env's agents' streams, ``(num_agents,
    2)``, agent ``a`` on row ``a`` (``rng.agent_stream(0, a, num_agents)``: env 0 of a
    batch of one). Call the same scalar physics helpers as the kernel and the comparison is
    bitwise on cpu and sim.

    Attributes
    ----------
    reset : callable
        ``reset(params, rng_states) -> state``. For a spec with state arrays marked
        ``keep_on_reset``: ``reset(params, rng_states, kept) -> state``, where ``kept``
        holds those arrays' current values (what the env's reset kernel sees); the
        returned state may leave them out (they keep their values).
    step : callable
        ``step(params, state, action, rng_states) -> (state, reward, terminated)``;
        must not modify its input state. ``reward`` is a float (``(num_agents,)``
        array for multi-agent envs).
    observe : callable
        ``observe(params, state) -> obs``: an array, or for a ``Dict``/``Tuple``
        observation space a dict/tuple of arrays shaped as the space
        (`kernelgym.envs.observations`).
    """

    reset: Callable[..., dict[str, np.ndarray]]
    step: Callable[..., tuple[dict[str, np.ndarray], Any, bool]]
    observe: Callable[..., Any]


@dataclasses.dataclass(frozen=True)
class StateArray:
    """One named state buffer of an env.

    Parameters
    ----------
    name : str
        A Python identifier, unique within the spec.
    dtype : numpy dtype-like
        Stored exactly (no silent casts).
    shape : tuple of int, or callable(params) -> tuple of int
        The trailing shape for one env (or one agent when ``per_agent``).
    per_agent : bool
        The buffer has shape ``(num_envs, num_agents, *shape)`` instead of
        ``(num_envs, *shape)``.
    initial : int, float or bool
        The value the buffer holds when allocated.
    restore_on_reset : bool
        Whether the runtime writes ``initial`` back for an env that is being reset,
        before the env's own reset logic runs (so env code needs not re-initialise
        counters and flags that always start at the same value).
    keep_on_reset : bool
        A value the trainer sets (``set_state``) and that survives resets: neither the
        runtime (``reset()`` included) nor the env's reset kernel writes it; the reset
        kernel may read it, and the reference's reset sees its current value (see
        `CPUReference`). It holds ``initial`` until first set.
    low, high : number, array, callable(params) -> number or array, or None
        The values the env's kernels accept, inclusive: ``set_state`` refuses a value
        outside them, naming the array, the env and the bound, and writes nothing (a
        kernel that indexes with a state value trusts it). An array broadcasts against
        one env's slice (``shape``, or ``(num_agents, *shape)`` when ``per_agent``).
        None (the default): no bound beyond the dtype's range. NaN is not compared
        (it is no index); give a float array finite bounds to keep infinities out.
    """

    name: str
    dtype: Any
    shape: tuple[int, ...] | Callable[[Any], tuple[int, ...]] = ()
    per_agent: bool = False
    initial: int | float | bool = 0
    restore_on_reset: bool = False
    keep_on_reset: bool = False
    low: Any = None
    high: Any = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"StateArray name: expected a python identifier, got {self.name!r}")
        if self.keep_on_reset and self.restore_on_reset:
            raise ValueError(
                f"StateArray {self.name!r}: keep_on_reset and restore_on_reset exclude each other "
                f"(kept across resets, or written back at each)"
            )
        try:
            dtype = np.dtype(self.dtype)
        except TypeError as error:
            raise TypeError(f"StateArray {self.name!r} dtype: expected a numpy dtype, got {self.dtype!r}") from error
        if dtype.kind not in "biuf":
            raise TypeError(f"StateArray {self.name!r} dtype: expected a bool, integer or float dtype, got {dtype}")
        object.__setattr__(self, "dtype", dtype)
        if not callable(self.shape):
            object.__setattr__(self, "shape", _check_shape(f"StateArray {self.name!r} shape", self.shape))
        if not isinstance(self.initial, (bool, int, float, np.bool_, np.integer, np.floating)):
            raise TypeError(f"StateArray {self.name!r} initial: expected a number or bool, got {self.initial!r}")
        stored = np.asarray(self.initial).astype(dtype)
        if stored != self.initial and not (isinstance(self.initial, float) and math.isnan(self.initial)):
            raise ValueError(f"StateArray {self.name!r} initial: {self.initial!r} is not representable as {dtype}")

    def resolved_bounds(self, params) -> tuple[np.ndarray | None, np.ndarray | None]:
        """``(low, high)`` for these params, each a float64 array (None where not declared)."""
        bounds: list[np.ndarray | None] = []
        for side in ("low", "high"):
            value = getattr(self, side)
            if callable(value):
                value = value(params)
            if value is None:
                bounds.append(None)
                continue
            where = f"StateArray {self.name!r} {side}"
            array = np.asarray(value)
            if array.dtype.kind not in "biuf":
                raise TypeError(f"{where}: expected a number or an array of numbers, got {value!r}")
            if np.any(np.isnan(array.astype(np.float64))):
                raise ValueError(f"{where}: expected a number, got NaN")
            bounds.append(array)
        low, high = bounds
        if low is not None and high is not None and np.any(low > high):
            raise ValueError(
                f"StateArray {self.name!r} low, high: expected low <= high, got low {low.tolist()} "
                f"and high {high.tolist()}"
            )
        return low, high

    def resolved_shape(self, params) -> tuple[int, ...]:
        """The trailing shape for these params (``shape`` itself unless it is a callable)."""
        if callable(self.shape):
            return _check_shape(f"StateArray {self.name!r} shape", self.shape(params))
        return self.shape


@dataclasses.dataclass(frozen=True)
class EnvSpec:
    """Everything the runtime and the tools need to know about one env id.

    Parameters
    ----------
    id : str
        e.g. ``"CartPole-v1"``; also registered with gymnasium as ``"kernelgym/<id>"``.
    observation_space, action_space : gymnasium.spaces.Space or callable(params) -> Space
        One agent's spaces. Observations: a ``Box``, or a ``Dict``/``Tuple`` (nested) of
        ``Box``, ``Discrete`` and ``MultiBinary`` leaves, one buffer each, bound by
        kernels as ``obs_<key>`` (`kernelgym.envs.observations`). Actions: ``Box``,
        ``Discrete``, ``MultiDiscrete`` or ``MultiBinary``.
    state : tuple of StateArray
        The env's state buffers (kernels bind them by name).
    step_kernel, reset_kernel : kernel, tuple of kernels, or str
        Core ``@env_kernel``/``@agent_kernel`` objects (see the module docstring for
        their named arguments); a tuple runs as phases, in order. A ``"module:attr"``
        string is loaded lazily.
    reference : CPUReference or str
        The exact single-env reference (``"module:attr"`` is loaded lazily).
    params : frozen dataclass instance or None
        Default params (gymnax style). Every field is an int, float or bool scalar, or
        a numpy array of numbers: a constant table (a maze layout, a lookup table),
        bound by name as one read-only array shared by every env (give it a
        ``dataclasses.field(default_factory=...)``); ``make(**kwargs)`` overrides
        fields through `validate_params`.
    num_agents : int or callable(params) -> int
    max_episode_steps : int, None or callable(params) -> int or None
        Episodes are truncated after this many steps (None: never).
    episode_step : str or None
        The name of a per-env integer state array (``per_agent=False``, shape ``()``)
        in which the env counts the steps of its episode: 0 after a reset, one more
        after every step. ``KernelVectorEnv.set_state`` starts the runtime's step
        counter (used for truncation at ``max_episode_steps``) from its value, so the
        two never disagree: an env set to step ``k`` of its episode is truncated after
        ``max_episode_steps - k`` more steps. None (the default): the env keeps no
        such counter and ``set_state`` starts the runtime's counter at 0.
    kernel_layout : {"env", "agent"}
        One thread per env, or one block per env and one thread per agent.
    render : str or callable, optional
        ``render(state: dict[str, np.ndarray], index, params) -> (H, W, 3) uint8``.
    render_fps : int
        Frames per second a video of the env should play at (gymnasium's
        ``metadata["render_fps"]``).
    state_strategy : str or callable, optional
        ``strategy(params) -> hypothesis strategy`` of single-env state dicts.
    invariants : str or callable, optional
        ``check(params, state) -> None``, raising AssertionError when a single-env
        state breaks a rule the env promises (e.g. agents stay on the grid).
    per_env_params : tuple of str
        The float fields of ``params`` that may differ from env to env and change at run
        time: ``make(..., field=array)``, ``env.set_params(...)`` and ``make(...,
        randomize={field: (low, high)})``. Kernels read them as scalars, from a per-env
        table (`kernelgym.envs.runtime.params`), so changing one needs no recompilation.
        Leave out fields that other parts of the spec depend on (spaces, shapes, time
        limit: those are computed from the scalar params). Empty (default): every field
        is a compile-time constant.
    param_ranges : dict of str to (low, high)
        The values of int and float ``params`` fields the env accepts, both ends included,
        e.g. ``{"wind": (0.0, 0.5)}``. The kit (`kernelgym.envs.testing`) draws params from
        them as it draws states and actions, the ends too, so that a branch guarded by a
        param is reached; a scalar field compiled into the kernels is drawn at its default
        or an end (each value compiles the kernels once), a `per_env_params` field anywhere
        in its range. Empty (the default): the kit checks the params it is given.
    precisions : tuple of {"float64", "float32"}
        The arithmetic precisions the env's kernels can be compiled for, the default
        first; ``make(..., precision=...)`` picks one. An env that declares them writes
        its physics once for both: its kernels bind ``real`` (the scalar type,
        ``numpy.float64`` or ``numpy.float32``) and cast with it (``real(x[i])``,
        ``real(0.5)``: a bare Python float literal is float64 and would promote float32
        arithmetic), its float params are bound as ``real`` scalars, and its reference's
        ``reset``, ``step`` and ``observe`` take a keyword ``real``. Empty (the default):
        no choice, the kernels compute in the types they are written in, and ``make``
        refuses any ``precision``.
    description : str
        One line for ``list_envs`` style listings.
    distribution, plugin : str or None
        Filled in by the registry: the distribution and plugin providing the id.
    """

    id: str
    observation_space: Any
    action_space: Any
    state: tuple[StateArray, ...]
    step_kernel: Any
    reset_kernel: Any
    reference: Any
    params: Any = None
    num_agents: int | Callable[[Any], int] = 1
    max_episode_steps: int | None | Callable[[Any], int | None] = None
    episode_step: str | None = None
    kernel_layout: str = "env"
    render: Any = None
    render_fps: int = 30
    state_strategy: Any = None
    invariants: Any = None
    per_env_params: tuple[str, ...] = ()
    precisions: tuple[str, ...] = ()
    description: str = ""
    distribution: str | None = None
    plugin: str | None = None
    # a dict: left out of the hash (a frozen dataclass hashes every field)
    param_ranges: dict = dataclasses.field(default_factory=dict, hash=False)

    def __post_init__(self):
        if not isinstance(self.id, str) or not self.id or "/" in self.id or self.id != self.id.strip():
            raise ValueError(f"EnvSpec id: expected a non-empty name without '/' or spaces around it, got {self.id!r}")
        where = f"EnvSpec {self.id!r}"
        state = tuple(self.state)
        if not all(isinstance(array, StateArray) for array in state):
            raise TypeError(f"{where} state: expected StateArray items, got {[type(a).__name__ for a in state]}")
        names = [array.name for array in state]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"{where} state: duplicate array names {duplicates}")
        object.__setattr__(self, "state", state)
        if self.kernel_layout not in KERNEL_LAYOUTS:
            raise ValueError(f"{where} kernel_layout: expected one of {KERNEL_LAYOUTS}, got {self.kernel_layout!r}")
        for field in ("step_kernel", "reset_kernel"):
            _check_kernels(where, field, getattr(self, field), self.kernel_layout)
        for field in ("reference", "render", "state_strategy", "invariants"):
            value = getattr(self, field)
            if value is not None:
                _check_reference(where, field, value)
        if self.reference is None:
            raise ValueError(f"{where} reference: a CPU reference implementation is required")
        if self.params is not None:
            _check_params_record(where, self.params)
        _check_episode_step(where, self.episode_step, state)
        object.__setattr__(self, "per_env_params", _check_per_env_params(where, self.per_env_params, self.params))
        object.__setattr__(self, "param_ranges", _check_param_ranges(where, self.param_ranges, self.params))
        object.__setattr__(self, "precisions", _check_precisions(where, self.precisions))
        # Resolve the params-dependent parts once, so a broken spec fails at registration.
        self.resolve(self.params)

    # ----------------------------------------------------------------- lazy parts
    def load(self, field: str):
        """Import and return the object a lazy field names (``"module:attr"``)."""
        if field not in LAZY_FIELDS:
            raise KeyError(f"EnvSpec.load field: expected one of {LAZY_FIELDS}, got {field!r}")
        value = getattr(self, field)
        if isinstance(value, str):
            return load_reference(value)
        return value

    def load_kernels(self, field: str) -> tuple:
        """``step_kernel`` or ``reset_kernel`` as a tuple of kernels of the spec's layout."""
        if field not in ("step_kernel", "reset_kernel"):
            raise KeyError(f"EnvSpec.load_kernels field: expected 'step_kernel' or 'reset_kernel', got {field!r}")
        kernels = self.load(field)
        kernels = tuple(kernels) if isinstance(kernels, (tuple, list)) else (kernels,)
        _check_kernels(f"EnvSpec {self.id!r}", field, kernels, self.kernel_layout, loaded=True)
        return kernels

    # --------------------------------------------------------- params-dependent parts
    def resolve(self, params=None) -> ResolvedSpec:
        """The concrete agents count, spaces, time limit and array shapes for ``params``."""
        params = self.params if params is None else params
        where = f"EnvSpec {self.id!r}"
        num_agents = self.num_agents(params) if callable(self.num_agents) else self.num_agents
        if isinstance(num_agents, bool) or not isinstance(num_agents, (int, np.integer)) or num_agents < 1:
            raise ValueError(f"{where} num_agents: expected an int >= 1, got {num_agents!r}")
        observation_space = _space(where, "observation_space", self.observation_space, params)
        action_space = _space(where, "action_space", self.action_space, params)
        if not isinstance(action_space, ACTION_SPACES):
            raise TypeError(
                f"{where} action_space: expected Box, Discrete, MultiDiscrete or MultiBinary, got {action_space}"
            )
        check_observation_space(where, observation_space)
        limit = self.max_episode_steps(params) if callable(self.max_episode_steps) else self.max_episode_steps
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit < 1):
            raise ValueError(f"{where} max_episode_steps: expected None or an int >= 1, got {limit!r}")
        shapes = {}
        bounds = {}
        for array in self.state:
            leading = (int(num_agents),) if array.per_agent else ()
            shapes[array.name] = leading + array.resolved_shape(params)
            bounds[array.name] = _broadcast_bounds(where, array, params, shapes[array.name])
        if self.episode_step is not None and shapes[self.episode_step] != ():
            raise ValueError(
                f"{where} episode_step: the state array {self.episode_step!r} must hold one "
                f"integer per env (shape ()), got shape {shapes[self.episode_step]}"
            )
        return ResolvedSpec(
            num_agents=int(num_agents),
            observation_space=observation_space,
            action_space=action_space,
            max_episode_steps=None if limit is None else int(limit),
            state_shapes=shapes,
            state_bounds=bounds,
        )

    def make_params(self, **overrides):
        """The default params with ``overrides`` applied (see `validate_params`)."""
        return validate_params(self, overrides)


class ResolvedSpec(NamedTuple):
    """`EnvSpec` parts that depend on the params, made concrete by `EnvSpec.resolve`."""

    num_agents: int
    observation_space: spaces.Space
    action_space: spaces.Space
    max_episode_steps: int | None
    state_shapes: dict[str, tuple[int, ...]]  # trailing shape per env, agent dim included
    # (low, high) per state array, each None or an array of its trailing shape (`StateArray.low`)
    state_bounds: dict[str, tuple[np.ndarray | None, np.ndarray | None]] = {}


def validate_params(spec: EnvSpec, overrides: dict):
    """Return ``spec.params`` with ``overrides`` applied, checked field by field.

    Raises
    ------
    TypeError
        An unknown field name, or a value of the wrong type (an int field takes an
        int, a float field an int or float, a bool field a bool).
    ValueError
        NaN or infinity for a field whose default is finite, or a value outside the
        physical range the params dataclass accepts (its ``__post_init__``).
    ValueError
        Whatever the params record's own ``__post_init__`` rejects (e.g. a negative
        length).
    """
    if not overrides:
        return spec.params
    if spec.params is None:
        raise TypeError(f"make({spec.id!r}): this env takes no params, got {sorted(overrides)}")
    fields = {field.name: field for field in dataclasses.fields(spec.params)}
    for name, value in overrides.items():
        if name not in fields:
            raise TypeError(f"make({spec.id!r}): unknown param {name!r}; expected one of {sorted(fields)}")
        default = getattr(spec.params, name)
        if not _same_kind(default, value):
            if isinstance(default, np.ndarray) and isinstance(value, np.ndarray):
                raise TypeError(
                    f"make({spec.id!r}) param {name!r}: expected ndarray of {default.ndim} dims and a dtype that "
                    f"casts to {default.dtype} (same kind), got ndarray of shape {value.shape} and dtype {value.dtype}"
                )
            raise TypeError(
                f"make({spec.id!r}) param {name!r}: expected {type(default).__name__}, "
                f"got {type(value).__name__} {value!r}"
            )
        if isinstance(default, np.ndarray):
            if default.dtype.kind == "f" and np.all(np.isfinite(default)) and not np.all(np.isfinite(value)):
                raise ValueError(f"make({spec.id!r}) param {name!r}: expected finite values, got a NaN or infinity")
            continue
        if isinstance(default, (float, np.floating)) and math.isfinite(default) and not math.isfinite(value):
            raise ValueError(f"make({spec.id!r}) param {name!r}: expected a finite number, got {value!r}")
    cast = {name: _cast(getattr(spec.params, name), value) for name, value in overrides.items()}
    # the params dataclass checks physical ranges in its __post_init__ (e.g. masses > 0)
    return dataclasses.replace(spec.params, **cast)


def resolve_precision(spec: EnvSpec, precision: str | None) -> str | None:
    """The precision ``make(spec.id, ..., precision=precision)`` compiles for.

    Returns
    -------
    str or None
        ``precision``, or the spec's default (``spec.precisions[0]``) for None; None
        for an env that declares no precisions (when ``precision`` is None).

    Raises
    ------
    ValueError
        ``precision`` is none of `PRECISIONS`, or one the env does not declare.
    """
    if precision is not None and (not isinstance(precision, str) or precision not in PRECISIONS):
        raise ValueError(f"precision: expected None or one of {tuple(PRECISIONS)}, got {precision!r}")
    if not spec.precisions:
        if precision is None:
            return None
        raise ValueError(
            f"precision: env {spec.id!r} declares no precision choice (its EnvSpec.precisions is "
            f"empty; its kernels compute in the types they are written in): expected None, "
            f"got {precision!r}"
        )
    if precision is None:
        return spec.precisions[0]
    if precision not in spec.precisions:
        raise ValueError(f"precision: env {spec.id!r} supports {spec.precisions}, got {precision!r}")
    return precision


def reference_reset(spec: EnvSpec, reset, params, rng_states, kept: dict | None = None) -> dict:
    """Call a reference's ``reset`` as the spec's kept arrays require (see `CPUReference`).

    ``kept`` holds the current values of the ``keep_on_reset`` arrays (one env's);
    None: their ``initial`` values. They are passed to ``reset`` (for a spec that has
    any) and put into the returned state, which they survive unchanged.
    """
    arrays = [array for array in spec.state if array.keep_on_reset]
    if not arrays:
        return reset(params, rng_states)
    shapes = spec.resolve(params).state_shapes
    if kept is None:
        kept = {array.name: np.full(shapes[array.name], array.initial, array.dtype) for array in arrays}
    kept = {array.name: np.array(kept[array.name], dtype=array.dtype) for array in arrays}
    state = dict(reset(params, rng_states, {name: value.copy() for name, value in kept.items()}))
    state.update(kept)
    return state


def load_reference(reference: str):
    """Import ``"module:attr"`` (``attr`` may be dotted)."""
    module_name, _, attr = reference.partition(":")
    obj = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


# ---------------------------------------------------------------------------- helpers
def _same_kind(default, value) -> bool:
    if isinstance(default, np.ndarray):
        return (
            isinstance(value, np.ndarray)
            and value.ndim == default.ndim
            and np.can_cast(value.dtype, default.dtype, casting="same_kind")
        )
    if isinstance(value, np.ndarray):
        return False
    if isinstance(default, (bool, np.bool_)):
        return isinstance(value, (bool, np.bool_))
    if isinstance(value, (bool, np.bool_)):
        return False
    if isinstance(default, (int, np.integer)):
        return isinstance(value, (int, np.integer))
    return isinstance(value, (int, float, np.integer, np.floating))


def _cast(default, value):
    """An override in its default's type: a float for a float field, a read-only array of the default's
    dtype for a constant table."""
    if isinstance(default, float):
        return float(value)
    if isinstance(default, np.ndarray):
        table = np.array(value, dtype=default.dtype, copy=True)
        table.flags.writeable = False
        return table
    return value


def _check_params_record(where, params):
    if not dataclasses.is_dataclass(params) or isinstance(params, type):
        raise TypeError(f"{where} params: expected a dataclass instance, got {params!r}")
    if not params.__dataclass_params__.frozen:
        raise TypeError(f"{where} params: the params dataclass {type(params).__name__} must be frozen")
    for field in dataclasses.fields(params):
        value = getattr(params, field.name)
        if isinstance(value, np.ndarray):
            if value.dtype.kind not in "biuf" or value.ndim == 0:
                raise TypeError(
                    f"{where} params.{field.name}: a constant table must be a numpy array of numbers "
                    f"with at least one axis, got dtype {value.dtype} shape {value.shape}"
                )
            continue
        if not isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
            raise TypeError(
                f"{where} params.{field.name}: expected an int, float or bool scalar, or a numpy array "
                f"(a constant table), got {value!r}"
            )


def _check_episode_step(where, name, state):
    """``episode_step`` is None or names a per-env integer StateArray (its shape is checked in resolve)."""
    if name is None:
        return
    arrays = {array.name: array for array in state}
    if not isinstance(name, str) or name not in arrays:
        raise ValueError(
            f"{where} episode_step: expected None or the name of a state array (one of {sorted(arrays)}), got {name!r}"
        )
    array = arrays[name]
    if array.keep_on_reset:
        raise ValueError(
            f"{where} episode_step: the state array {name!r} restarts at each reset; it cannot be keep_on_reset"
        )
    if array.per_agent:
        raise ValueError(f"{where} episode_step: the state array {name!r} must be per env, got per_agent=True")
    if array.dtype.kind not in "iu":
        raise TypeError(f"{where} episode_step: the state array {name!r} must have an integer dtype, got {array.dtype}")


def _check_per_env_params(where, names, params) -> tuple[str, ...]:
    """Distinct names of float fields of ``params``."""
    if isinstance(names, str):
        raise TypeError(f"{where} per_env_params: expected a tuple of params field names, got the string {names!r}")
    names = tuple(names)
    floats = (
        [
            field.name
            for field in dataclasses.fields(params)
            if isinstance(getattr(params, field.name), (float, np.floating))
        ]
        if params is not None
        else []
    )
    bad = [name for name in names if name not in floats]
    if bad or len(set(names)) != len(names):
        raise ValueError(
            f"{where} per_env_params: expected distinct names of float params fields (from {floats}), got {names!r}"
        )
    return tuple(name for name in floats if name in names)  # the record's order: the randomize draw order


def _check_param_ranges(where, ranges, params) -> dict:
    """``{field: (low, high)}`` of int or float fields of ``params``, ``low <= high``, both finite."""
    if not isinstance(ranges, dict):
        raise TypeError(f"{where} param_ranges: expected a dict of field -> (low, high), got {type(ranges).__name__}")
    numbers = (
        {
            field.name: type(getattr(params, field.name))
            for field in dataclasses.fields(params)
            if isinstance(getattr(params, field.name), (int, float, np.integer, np.floating))
            and not isinstance(getattr(params, field.name), (bool, np.bool_))
        }
        if params is not None
        else {}
    )
    checked = {}
    for name, bounds in ranges.items():
        if name not in numbers:
            raise ValueError(
                f"{where} param_ranges: expected names of int or float params fields (from {sorted(numbers)}), "
                f"got {name!r}"
            )
        kind = int if issubclass(numbers[name], (int, np.integer)) else float
        valid = (
            isinstance(bounds, tuple)
            and len(bounds) == 2
            and all(isinstance(v, (int, np.integer) if kind is int else (int, float, np.number)) for v in bounds)
            and not any(isinstance(v, (bool, np.bool_)) for v in bounds)
            and all(math.isfinite(v) for v in bounds)
            and bounds[0] <= bounds[1]
        )
        if not valid:
            raise ValueError(
                f"{where} param_ranges[{name!r}]: expected a tuple (low, high) of finite {kind.__name__}s with "
                f"low <= high, got {bounds!r}"
            )
        checked[name] = (kind(bounds[0]), kind(bounds[1]))
    return checked


def _check_precisions(where, precisions) -> tuple[str, ...]:
    """A tuple of distinct names from `PRECISIONS`."""
    if isinstance(precisions, str):
        raise TypeError(
            f"{where} precisions: expected a tuple of names from {tuple(PRECISIONS)}, got the string {precisions!r}"
        )
    precisions = tuple(precisions)
    unknown = [name for name in precisions if name not in PRECISIONS]
    if unknown or len(set(precisions)) != len(precisions):
        raise ValueError(f"{where} precisions: expected distinct names from {tuple(PRECISIONS)}, got {precisions!r}")
    return precisions


def _check_shape(where, shape) -> tuple[int, ...]:
    try:
        shape = tuple(shape)
    except TypeError as error:
        raise TypeError(f"{where}: expected a tuple of ints, got {shape!r}") from error
    if not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 1 for n in shape):
        raise ValueError(f"{where}: expected a tuple of ints >= 1, got {shape!r}")
    return tuple(int(n) for n in shape)


def _broadcast_bounds(where, array, params, shape):
    """``array``'s (low, high) for ``params``, each None or broadcast to one env's ``shape``."""
    bounds = []
    for side, value in zip(("low", "high"), array.resolved_bounds(params)):
        if value is not None:
            try:
                value = np.broadcast_to(value, shape)
            except ValueError as error:
                raise ValueError(
                    f"{where} state {array.name!r} {side}: expected a number or an array that "
                    f"broadcasts to one env's shape {shape}, got shape {value.shape}"
                ) from error
            if array.dtype.kind == "f":
                # compared in the stored precision, as the env's own float32 clips round its bounds
                value = value.astype(array.dtype)
        bounds.append(value)
    return tuple(bounds)


def _check_reference(where, field, value):
    if isinstance(value, str):
        module, _, attr = value.partition(":")
        if not module or not attr:
            raise ValueError(f"{where} {field}: expected 'module:attr', got {value!r}")


def _check_kernels(where, field, value, layout, loaded=False):
    """A kernel, a non-empty tuple of kernels of ``layout`` (agent layout only for several), or a string."""
    from kernelgym.core.kernels import AgentKernel, EnvKernel

    if isinstance(value, str) and not loaded:
        _check_reference(where, field, value)
        return
    kernels = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    wanted = EnvKernel if layout == "env" else AgentKernel
    if not kernels or not all(isinstance(kernel, wanted) for kernel in kernels):
        raise TypeError(
            f"{where} {field}: expected a {'@env_kernel' if layout == 'env' else '@agent_kernel'} "
            f"(or a tuple of them, or a lazy 'module:attr' string) for kernel_layout={layout!r}, got {value!r}"
        )


def _space(where, field, value, params):
    space = value(params) if callable(value) and not isinstance(value, spaces.Space) else value
    if not isinstance(space, spaces.Space):
        raise TypeError(f"{where} {field}: expected a gymnasium space, got {space!r}")
    return space
