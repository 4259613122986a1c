"""Bind write-once kernels to fixed buffers BY NAME, once; launch with O(arguments) checks after.

A kernel body's parameters after its layout parameters (``i`` for an ``@env_kernel``,
``env, agent, num_agents`` for an ``@agent_kernel``) are names. `bind` looks each one
up, once, in a mapping of available values (arrays and scalars), so a body names only
what it uses, in any order:

```python
@env_kernel
def push(i, velocity, x, dt):            # any subset of the names, any order
    x[i] += dt * velocity[i]

launch = bind(push, {"x": x, "velocity": v, "dt": 0.1, "unused": w},
              backend="cpu", num_envs=len(x))
launch()                                  # straight to the compiled launcher
```

Several bodies, some behind a per-env mask, can share ONE launch: for each env they run
in order in one thread (a body touches only its own env's rows, so this equals
launching them one after the other). `Branch` runs one list of bodies or another
depending on a named per-env mask::

    launch = bind([Branch("reset_mask", then=[reset], otherwise=[step]), finish], values, ...)

`bind_launches` binds several such programs that run as separate launches, in order:
a launch boundary is a barrier over every agent of every env (the phases of a
multi-agent step).

A `Precondition` at the head of a program gates it: its check body returns a fault code
(< 0: the env may run) and the smallest code lands in a one-element ``fault`` array.
On ``cpu`` every env is checked first (a parallel pass) and no env runs when one fails;
on ``cuda``/``sim`` (no grid-wide barrier inside a launch) each env checks itself and a
failing env does not run, with no host synchronization. Values named in ``per_call``
are passed at each call (``launch(actions)``), e.g. the caller's own action buffer.

On ``cpu`` a launch of fewer than `PARALLEL_FROM` (env, agent) pairs runs the
launcher's serial twin in the calling thread (same program, same results, no parallel
region to enter), and a launch returns the smallest fault code its Precondition found.
Larger launches run the thread team, the serial twin, or the faster of the two, timed
(``KERNELGYM_CPU_THREADS``, `kernelgym.core.cpu_threads`).
The bound arrays reach a cpu launcher packed once in one struct (see
`kernelgym.core.codegen.program_launcher_module`): a call unboxes that struct and the
per-call values, not every array (Numba's dispatcher costs about 50 ns an array).

``fast_math=True`` binds a fast-math build: FMA contraction on (cuda: NVVM ``-fma=1``; cpu:
LLVM may fuse too, the FMA-contracting twin), so ``a * b + c`` may round once and results
differ from the default build's in the last bits. The default contracts nowhere and gives
the same bits on cpu and cuda (`kernelgym.core.contraction`).

A `PerEnvScalar` value hands each env its own entry of a 1-D array: a body's parameter
bound to ``PerEnvScalar(lengths)`` receives ``lengths[env]``, a scalar, as if a scalar were
bound, so one body serves compile-time constants and per-env values alike (per-env env
params: `kernelgym.envs`). The array stays writable from the host between launches.

A `LaunchOrder` given to `bind` (cpu only, for the kit's order check) runs the program
in one thread, the envs and the agents of each env in the order it holds (changed in
place between launches): a kernel whose results depend on that order races on a GPU,
where an env's agents run concurrently.

Everything that depends only on what was bound is checked at bind time: a name no value
matches raises `BindingError` naming the kernel, the parameter and the available names;
every per-env array must have at least ``num_envs`` rows (per-agent arrays also
``num_agents`` columns), whether a ``layouts`` hint says so or the body indexes it so
(`kernelgym.core.extents` reads each body once), so no launch can write past a buffer
on any backend; written arrays must be writable, not broadcast, and share no memory
with another bound array other than row for row; arrays and scalars must suit the
backend. On cpu the launcher is also typed for the values at bind: values the bodies
cannot take (and read-only arrays they write) make the launch raise a clear error naming
them, at its first call as Numba's own error did, before any kernel runs. A bound launch then checks only what can
change after bind: each per-call array's rows, and that no bound tensor was re-pointed
(``set_``, ``resize_``): a shape and a data-pointer compare per argument, no allocation.
Without per-call values or bound tensors it calls the compiled launcher directly.
A cuda launch runs on torch's current CUDA stream, read at each call
(`kernelgym.core.streams`), so ``torch.cuda.stream`` and CUDA-graph capture order it.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

from kernelgym.core import codegen, cpu_threads, extents, kernels, prebuilt_launch
from kernelgym.core.backends import resolve_backend, simulator_enabled
from kernelgym.core.device_functions import register_cuda_overloads
from kernelgym.core.kernels import SCALAR_TYPES, AgentKernel, EnvKernel, check_count, kernel_argument

# bind_launches' parameter ``cpu_threads`` hides the module there
_threads_strategy = cpu_threads.cpu_threads_strategy

__all__ = [
    "Branch",
    "BindingError",
    "BoundLaunch",
    "LaunchOrder",
    "LaunchRecord",
    "PerEnvScalar",
    "Precondition",
    "bind",
    "bind_launches",
    "parameter_names",
    "LAYOUT_KINDS",
    "NO_FAULT",
    "PARALLEL_FROM",
    "check_fast_math",
]

# How a value's leading dims relate to the launch: checked at bind time.
LAYOUT_KINDS = ("per_env", "per_agent", "shared")
# when a cpu program compiles (`bind_launches`): at bind, or at its first launch
COMPILE_AT = ("bind", "first_launch")
# cpu launches of fewer (env, agent) pairs than this run in the calling thread: waking
# the worker threads costs about 1.5 us, what a CartPole step of ~100 envs costs serially.
PARALLEL_FROM = 128
# CPython passes calls with more positional arguments than this as one tuple
# (CALL_FUNCTION_EX), which Numba cannot inline into a launcher.
MAX_BODY_PARAMETERS = 30


class BindingError(TypeError):
    """A kernel parameter that no available value matches, or a misbuilt program."""


class Branch(NamedTuple):
    """Run ``then`` for the envs whose ``mask`` entry is true, ``otherwise`` for the others.

    ``mask`` names a per-env array among the available values; ``then`` and
    ``otherwise`` are kernels (or further branches), run in order.
    """

    mask: str
    then: Sequence = ()
    otherwise: Sequence = ()


class Precondition(NamedTuple):
    """Gate a program on a per-env check (first item of a program only).

    ``check`` is an `env_kernel` whose body returns an int fault code: negative when
    env ``i`` may run, else a code (e.g. the flat index of a bad input). Write it
    without side effects and branch-free (``|`` rather than ``or``) and the cpu pass
    over every env vectorizes. ``fault`` names a one-element int64 array that keeps
    the smallest code seen (`NO_FAULT` when none): cpu checks every env before any
    runs and runs none when one fails; cuda/sim skip the failing envs only (atomic
    min, no host synchronization). ``record``, an optional `env_kernel`, runs for each
    failing env (e.g. to keep its inputs for the error message). A program holding
    only a Precondition just checks.
    """

    check: object
    fault: str
    record: object = None


class _Phases(NamedTuple):
    """Programs fused into one launch, a barrier between them (see `bind_launches`)."""

    programs: tuple


class PerEnvScalar:
    """A value that is a scalar per env: a body bound to it receives ``array[env]``.

    ``array`` is 1-D with at least ``num_envs`` entries (a numpy array on cpu, a device
    array or CUDA tensor on cuda/sim), checked at bind time like a per-env array. The
    launcher reads the entry at each launch, so writing the array between launches
    changes the value with no recompilation (unlike a bound scalar, a constant of the
    launcher).

    ``stride``, optional, is a one-element integer array (on the same backend) saying
    whether the envs' values may differ: write 0 while every env holds the same value
    and 1 once they differ (changeable between launches). While every stride of a
    launch is 0, a cpu launch runs a loop in which each such value is read once, before
    it (a register, as cheap as a constant, instead of a stream over the array); cuda
    launches read ``array[env]`` either way.
    """

    __slots__ = ("array", "stride")

    def __init__(self, array, stride=None):
        self.array = array
        self.stride = stride

    def __repr__(self):
        return f"PerEnvScalar({self.array!r}" + ("" if self.stride is None else f", stride={self.stride!r}") + ")"


def _stride_name(name: str) -> str:
    """The launcher argument holding a `PerEnvScalar`'s stride (never a parameter name)."""
    return f"{name}.stride"


# What a fault array holds when no check failed (any code is smaller).
NO_FAULT = 2**63 - 1


class LaunchOrder:
    """The order in which a cpu launch bound with it runs envs and agents (in one thread).

    For finding order-dependent kernels without a GPU (the kit's ``agent_order`` check):
    bind a program with ``order=`` and change the order with `set` between launches.
    Starts in order (envs ``0 .. num_envs - 1``, agents ``0 .. num_agents - 1``).

    Parameters
    ----------
    num_envs : int
    num_agents : int
        The agents per env (1 for env-layout programs).

    Attributes
    ----------
    env_order : numpy.ndarray
        int64 ``(num_envs,)``: the env run k-th.
    agent_order : numpy.ndarray
        int64 ``(num_envs, num_agents)``: row ``env``, the order of that env's agents.
    agent_turns : numpy.ndarray
        int64 ``(1,)``: how many agents of each row run (all, unless `set` says fewer).
    """

    def __init__(self, num_envs: int, num_agents: int = 1):
        self.num_envs = check_count("num_envs", num_envs)
        self.num_agents = check_count("num_agents", num_agents, minimum=1)
        self.env_order = np.arange(self.num_envs, dtype=np.int64)
        self.agent_order = np.tile(np.arange(self.num_agents, dtype=np.int64), (self.num_envs, 1))
        self.agent_turns = np.full(1, self.num_agents, dtype=np.int64)

    def set(self, env_order=None, agent_order=None, turns: int | None = None) -> None:
        """Run the envs in ``env_order`` and each env's agents in its row of ``agent_order``
        (None: in order), only the first ``turns`` of each row (None: all); written in
        place, so bound launches see it.

        Raises
        ------
        ValueError
            An order that is not a permutation of the right shape, naming the argument.
        """
        envs = np.arange(self.num_envs) if env_order is None else np.asarray(env_order)
        agents = (
            np.tile(np.arange(self.num_agents), (self.num_envs, 1)) if agent_order is None else np.asarray(agent_order)
        )
        if envs.shape != (self.num_envs,) or not np.array_equal(np.sort(envs), np.arange(self.num_envs)):
            raise ValueError(f"env_order: expected a permutation of range({self.num_envs}), got {envs!r}")
        if agents.shape != (self.num_envs, self.num_agents) or not np.all(
            np.sort(agents, axis=1) == np.arange(self.num_agents)
        ):
            raise ValueError(
                f"agent_order: expected {self.num_envs} rows, each a permutation of "
                f"range({self.num_agents}), got {agents!r}"
            )
        turns = self.num_agents if turns is None else turns
        if isinstance(turns, bool) or not isinstance(turns, (int, np.integer)) or not 0 <= turns <= self.num_agents:
            raise ValueError(f"turns: expected None or an int in [0, {self.num_agents}], got {turns!r}")
        self.env_order[:] = envs
        self.agent_order[:] = agents
        self.agent_turns[0] = turns

    def __repr__(self):
        return f"LaunchOrder(envs {self.env_order.tolist()}, agents {self.agent_order.tolist()})"


def parameter_names(kernel) -> tuple[str, ...]:
    """The names a write-once kernel's body binds: its parameters after the layout ones."""
    leading = 1 if isinstance(kernel, EnvKernel) else 3
    return tuple(inspect.signature(kernel.py_func).parameters)[leading:]


class LaunchRecord(NamedTuple):
    """What one bound launch hands a device kernel, on every backend (audits, host-path benchmarks).

    Attributes
    ----------
    description : str
        The bodies the launch runs.
    griddim, blockdim : int or tuple
        The launch configuration a device backend uses.
    arguments : tuple
        The leading launch arguments (the counts, then the bound values as the backend holds them).
    per_call : tuple
        Templates of the values passed at each call, in order.
    """

    description: str
    griddim: int | tuple
    blockdim: int | tuple
    arguments: tuple
    per_call: tuple


class BoundLaunch:
    """Kernels bound to fixed values: call it to launch (no allocation; per-call rows and
    bound tensors checked, see the module docstring).

    Attributes
    ----------
    names : tuple of str
        Every value name the bound bodies use, in launcher order (per launch).
    records : tuple of LaunchRecord
        One per launch, in order.
    launches : tuple
        The launch objects themselves (on cuda, `kernelgym.core.prebuilt_launch.launch_path`
        tells which launch path each takes).
    programs : int
        How many programs were bound: one launch each unless fused (`bind_launches`).
    """

    __slots__ = ("_calls", "names", "per_call", "_description", "records", "launches", "programs")

    def __init__(self, calls, names, description, per_call=(), records=(), launches=(), programs=None):
        self._calls = tuple(calls)
        self.names = tuple(names)
        self.per_call = tuple(per_call)
        self._description = description
        self.records = tuple(records)
        self.launches = tuple(launches)
        self.programs = len(self._calls) if programs is None else programs

    def __call__(self, *per_call) -> int:
        """Launch, passing the ``per_call`` values in order.

        Returns
        -------
        int
            The smallest fault code a cpu launch's Precondition found, `NO_FAULT` when
            none (device launches only record it in their fault array).
        """
        fault = NO_FAULT
        for call in self._calls:
            code = call(*per_call)
            if code is not None and code < fault:
                fault = code
        return fault

    def as_function(self):
        """The fastest callable equal to calling this launch: the compiled launcher
        itself (arguments already bound) when there is one launch."""
        return self._calls[0] if len(self._calls) == 1 else self.__call__

    def __repr__(self):
        return f"<BoundLaunch {self._description}>"


def bind(
    program,
    values: Mapping,
    *,
    backend: str | None,
    num_envs: int,
    num_agents: int | None = None,
    layouts: Mapping | None = None,
    per_call: Sequence[str] = (),
    fast_math: bool = False,
    order: LaunchOrder | None = None,
) -> BoundLaunch:
    """Bind ``program`` to ``values`` by name as ONE launch.

    Parameters
    ----------
    program : EnvKernel, AgentKernel, Branch, or a sequence of them
        Bodies run in order for each env (or each (env, agent)); all of one layout.
    values : mapping of str to array or scalar
        What parameter names resolve to. Torch tensors are taken zero-copy.
    backend : {"cpu", "cuda", "sim", "auto"} or None
    num_envs : int
    num_agents : int, optional
        Needed for agent kernels and for ``per_agent`` values.
    layouts : mapping of str to {"per_env", "per_agent", "shared"}, optional
        How each value's leading dims relate to the launch. Arrays default to
        ``per_env`` (leading dim >= ``num_envs``); ``per_agent`` also needs dim 1 >=
        ``num_agents``; ``shared`` values are not checked. A tuple of arrays is checked
        item by item.
    per_call : sequence of str
        Names passed at each call rather than bound (see `BoundLaunch.__call__`).
    fast_math : bool
        Compile with FMA contraction on: ``a * b + c`` may round once (NVVM ``-fma=1`` on
        cuda, LLVM's ``contract`` on cpu, nothing on sim). False (default): the same bits
        on cpu and cuda (see `kernelgym.core.contraction`).
    order : LaunchOrder, optional
        ``cpu`` only, programs without a Precondition: run in one thread in this order
        (the kit's order check; never a hot path).

    Returns
    -------
    BoundLaunch

    Raises
    ------
    BindingError
        A parameter name that ``values`` lacks (naming kernel, parameter and the
        available names), or a program mixing layouts.
    ValueError
        A per-env or per-agent array with too few rows or dims for the layout or for what
        the bodies index; a broadcast array a body writes; two arrays, one written, that
        share memory at different rows; a count or int scalar beyond 64 bits.
    TypeError
        A value the backend cannot take (dtype, byte order, tensor device or dtype), or a
        ``fast_math`` that is not a bool.

    At each launch, before any kernel runs: a TypeError names a read-only array a body
    writes, or (cpu: found at bind, raised at launch as Numba did) values the bodies do not
    type-check with (`kernelgym.core.kernels.KernelTypingError`); a ValueError names a
    per-call array with too few rows or a bound tensor re-pointed since bind.
    """
    return bind_launches(
        [program],
        values,
        backend=backend,
        num_envs=num_envs,
        num_agents=num_agents,
        layouts=layouts,
        per_call=per_call,
        fast_math=fast_math,
        order=order,
    )


def bind_launches(
    programs,
    values: Mapping,
    *,
    backend: str | None,
    num_envs: int,
    num_agents: int | None = None,
    layouts: Mapping | None = None,
    per_call: Sequence[str] = (),
    fast_math: bool = False,
    order: LaunchOrder | None = None,
    compile_at: str = "bind",
    cpu_threads: str | None = None,
) -> BoundLaunch:
    """Bind several programs (see `bind`) that run in order, a barrier between each two.

    ``compile_at`` : {"bind", "first_launch"}
        When a cpu program compiles: here (the default), or at its first launch, so that a
        caller can refuse its per-call values (an env's actions) before paying for the
        build. Either way a value the bodies cannot type is raised at each launch
        (`kernelgym.core.kernels.KernelTypingError`). Device backends build at bind.
    ``cpu_threads`` : {"adaptive", "all", "one"} or None
        The cpu threading strategy of these launches (`kernelgym.core.cpu_threads`); None
        reads ``KERNELGYM_CPU_THREADS``. ``"one"`` compiles the serial twin only: for a
        launch that runs rarely (an env's reset), whose thread team's build would double
        its compile time.

    A barrier covers all agents of an env: use one program per phase of a multi-agent step
    whose agents read what other agents wrote. Where the programs include agent kernels,
    they run as ONE launch: on cuda each env's agents in one block (its threads stride over
    them where there are more than `kernelgym.core.kernels.MAX_AGENT_THREADS`), a block
    barrier (``syncthreads``) between phases; on cpu each phase over an env's agents before
    the next; env programs once per env (cuda: in the env's first thread). Envs are
    independent, so this equals one launch per program bit for bit. Otherwise (env
    programs only, or Preconditions that differ) each program is its own launch (a launch
    boundary is the barrier).
    """
    backend = resolve_backend(backend)
    fast_math = check_fast_math(fast_math)
    if compile_at not in COMPILE_AT:
        raise ValueError(f"compile_at: expected one of {COMPILE_AT}, got {compile_at!r}")
    if cpu_threads is not None:
        cpu_threads = _threads_strategy(cpu_threads)
    num_envs = check_count("num_envs", num_envs)
    if num_agents is not None:
        num_agents = check_count("num_agents", num_agents)
    if not isinstance(values, Mapping):
        raise TypeError(f"values: expected a mapping of names to arrays and scalars, got {type(values).__name__}")
    layouts = dict(layouts or {})
    unknown = {name: kind for name, kind in layouts.items() if kind not in LAYOUT_KINDS}
    if unknown:
        raise ValueError(f"layouts: expected kinds from {LAYOUT_KINDS}, got {unknown}")
    per_call = tuple(per_call)
    if order is not None:
        if not isinstance(order, LaunchOrder):
            raise TypeError(f"order: expected None or a LaunchOrder, got {type(order).__name__}")
        if backend != "cpu":
            raise ValueError(f"order: a LaunchOrder runs the cpu twin only, got backend {backend!r}")
        if order.num_envs != num_envs:
            raise ValueError(f"order: expected a LaunchOrder of num_envs={num_envs}, got {order.num_envs}")
    missing = [name for name in per_call if name not in values]
    per_env_calls = [name for name in per_call if isinstance(values.get(name), PerEnvScalar)]
    if per_env_calls:
        raise BindingError(
            f"per_call: names {per_env_calls} are PerEnvScalar values; bind them once and write "
            "their arrays between launches"
        )
    if missing:
        raise BindingError(f"per_call: names {missing} have no template among the values; available: {sorted(values)}")
    programs = list(programs)
    num_programs = len(programs)
    programs = _fused(programs, num_envs, num_agents)
    checked: dict = {}
    written: set = set()
    needs: dict = {}  # name -> least leading dims, for the per-call values checked at each launch
    calls, names, descriptions, records = [], [], [], []
    for program in programs:
        call, used, description, record = _bind_one(
            program,
            values,
            backend,
            num_envs,
            num_agents,
            layouts,
            checked,
            per_call,
            fast_math,
            order,
            written,
            needs,
            compile_at == "first_launch",
            cpu_threads,
        )
        calls.append(call)
        names += used
        descriptions.append(description)
        records.append(record)
    launches = tuple(calls)
    arrays = {
        f"value {name!r}": value
        for name, value in checked.items()
        if not isinstance(value, (PerEnvScalar, type)) and not isinstance(value, SCALAR_TYPES)
    }
    arrays = {
        label: item
        for label, value in arrays.items()
        for item in (value if isinstance(value, tuple) else (value,))
        if not isinstance(item, SCALAR_TYPES)
    }
    extents.check_no_overlap(arrays, {f"value {name!r}" for name in written})
    watch = extents.TensorWatch()
    for name in dict.fromkeys(names):
        value = values.get(name)
        if name not in per_call:
            watch.add(f"value {name!r}", value.array if isinstance(value, PerEnvScalar) else value)
    per_call_needs = tuple(
        (position, f"per-call value {name!r}", needs[name]) for position, name in enumerate(per_call) if needs.get(name)
    )
    if watch or per_call_needs:
        calls = [_guarded(call, watch, per_call_needs) for call in calls]
    return BoundLaunch(calls, names, " -> ".join(descriptions), per_call, records, launches, num_programs)


def _fused(programs: list, num_envs: int, num_agents) -> list:
    """``programs`` as one phased program where one launch can run them (see `bind_launches`):
    agent kernels among them and the same Precondition (or none) heading each, which then
    heads the fused program once. An env's agents are always in one block (`kernels.agent_grid`;
    more agents than threads: the block strides over them), so its barrier covers them all."""
    if len(programs) < 2 or num_agents is None or num_agents < 1:
        return programs
    items = [_items(program) for program in programs]
    heads = {id(program[0]) if program and isinstance(program[0], Precondition) else None for program in items}
    if len(heads) > 1 or not any(_has_agent_kernel(program) for program in items):
        return programs
    head = [items[0][0]] if heads != {None} else []
    return [[*head, _Phases(tuple(program[len(head) :] for program in items))]]


def _has_agent_kernel(items) -> bool:
    for item in items:
        if isinstance(item, AgentKernel):
            return True
        if isinstance(item, Branch) and (
            _has_agent_kernel(_items(item.then)) or _has_agent_kernel(_items(item.otherwise))
        ):
            return True
    return False


def _guarded(call, watch, per_call_needs):
    """``call`` checking, at each launch, what may have changed since bind: per-call rows and
    re-pointed tensors (O(arguments), no allocation). A cpu launcher's ``func`` and ``args``
    stay readable on it, as on the partial it wraps."""
    needs = tuple(
        (position, label, needed[0], needed[1] if len(needed) > 1 else -1, len(needed))
        for position, label, needed in per_call_needs
    )
    tensors = watch if watch else None

    def guarded(*per_call):
        if tensors is not None:
            tensors.check()
        for position, label, rows, columns, ndim in needs:
            shape = getattr(per_call[position], "shape", None) if position < len(per_call) else None
            if shape is None or len(shape) < ndim or shape[0] < rows or (columns >= 0 and shape[1] < columns):
                _refuse_per_call(label, per_call, position, (rows, columns)[:ndim])
        return call(*per_call)

    guarded.func, guarded.args = getattr(call, "func", call), getattr(call, "args", ())
    return guarded


def _refuse_per_call(label, per_call, position, needed) -> None:
    if position >= len(per_call):
        raise TypeError(f"{label}: expected {position + 1} or more per-call values, got {len(per_call)}")
    value = per_call[position]
    shape = getattr(value, "shape", None)
    raise ValueError(
        f"{label}: expected an array of at least {needed} leading dims, got "
        f"{'a ' + type(value).__name__ if shape is None else f'shape {tuple(shape)}'}"
    )


def _items(program) -> list:
    if isinstance(program, (EnvKernel, AgentKernel, Branch, Precondition)):
        return [program]
    try:
        return list(program)
    except TypeError:
        raise BindingError(
            f"program: expected an env_kernel, an agent_kernel, a Branch or a sequence of them, "
            f"got {type(program).__name__}"
        ) from None


def _available_names(name: str, values) -> str:
    """The names a parameter may take, the user's before the runtime's ``_`` ones, and the closest."""
    own = sorted(key for key in values if not key.startswith("_"))
    internal = sorted(key for key in values if key.startswith("_"))
    text = f"available: {own}" + (f", then the runtime's {internal}" if internal else "")
    close = difflib.get_close_matches(name, own + internal, n=1)
    return text + (f"; did you mean {close[0]!r}?" if close else "")


def _bind_one(
    program,
    values,
    backend,
    num_envs,
    num_agents,
    layouts,
    checked,
    per_call,
    fast_math,
    order=None,
    written=None,
    needs=None,
    deferred=False,
    strategy=None,
):
    bodies: list = []  # distinct bodies, by position
    names: list[str] = []  # launcher arguments (bound first, per-call last)
    kinds: set[str] = set()

    def position_of(name: str, needed_by: str) -> str:
        # statements hold names until every name is known: per-call ones go last
        if name not in values:
            raise BindingError(
                f"{needed_by}: parameter {name!r} matches no available name; " + _available_names(name, values)
            )
        if name not in names:
            if name not in checked:
                checked[name] = _checked_value(name, values[name], layouts.get(name), backend, num_envs, num_agents)
            names.append(name)
            value = checked[name]
            if isinstance(value, PerEnvScalar) and value.stride is not None:
                checked[_stride_name(name)] = value.stride
                names.append(_stride_name(name))
        return name

    def body_call(kernel) -> tuple:
        parameters = parameter_names(kernel)
        if len(parameters) + (1 if kernel.kind == "env" else 3) > MAX_BODY_PARAMETERS:
            raise BindingError(
                f"{kernel.__qualname__}: {len(parameters)} value parameters; a body takes at most "
                f"{MAX_BODY_PARAMETERS} parameters in all (Numba cannot inline longer calls): split it"
            )
        if kernel not in bodies:
            bodies.append(kernel)
        return bodies.index(kernel), tuple(position_of(name, kernel.__qualname__) for name in parameters)

    def compile_block(block, top=False) -> list:
        statements: list[tuple] = []  # ("call" | "require" | "if", ...), each kind its own fields
        for index, item in enumerate(_items(block)):
            if isinstance(item, Precondition):
                if not (top and index == 0):
                    raise BindingError("Precondition: expected as the first item of a program only")
                if not isinstance(item.check, EnvKernel):
                    raise BindingError(f"Precondition check: expected an env_kernel, got {type(item.check).__name__}")
                if layouts.get(item.fault) != "shared":
                    raise BindingError(f"Precondition fault {item.fault!r}: expected a 'shared' one-element array")
                if item.record is not None and not isinstance(item.record, EnvKernel):
                    raise BindingError(f"Precondition record: expected an env_kernel, got {type(item.record).__name__}")
                body, positions = body_call(item.check)
                record = None if item.record is None else body_call(item.record)
                fault = position_of(item.fault, "Precondition")
                if getattr(checked[fault], "size", 0) < 1:  # the launch writes element 0
                    shape = getattr(checked[fault], "shape", None)
                    raise BindingError(
                        f"Precondition fault {item.fault!r}: expected a one-element array for the fault "
                        f"code, got {'a scalar' if shape is None else f'shape {tuple(shape)}'}"
                    )
                statements.append(("require", body, positions, fault, record))
                continue
            if isinstance(item, _Phases):
                for phase in item.programs:
                    outer = set(kinds)
                    kinds.clear()
                    block = compile_block(phase)
                    statements.append(("phase", "agent" if "agent" in kinds else "env", block))
                    kinds.update(outer)
                kinds.add("phased")
                continue
            if isinstance(item, Branch):
                if not isinstance(item.mask, str):
                    raise BindingError(f"Branch mask: expected a value name, got {item.mask!r}")
                mask = position_of(item.mask, f"Branch({item.mask!r})")
                if layouts.get(item.mask, "per_env") != "per_env":
                    raise BindingError(f"Branch mask {item.mask!r}: expected a per-env array")
                statements.append(("if", mask, compile_block(item.then), compile_block(item.otherwise)))
                continue
            if not isinstance(item, (EnvKernel, AgentKernel)):
                raise BindingError(
                    f"program: expected env_kernel, agent_kernel or Branch items, got {type(item).__name__}"
                )
            kinds.add(item.kind)
            statements.append(("call", *body_call(item)))
        return statements

    statements = compile_block(program, top=True)
    if not bodies:
        raise BindingError("program: expected at least one kernel, got none")
    kinds = kinds or {"env"}  # a lone Precondition runs per env
    if "phased" in kinds:  # env and agent phases in one agent launch
        kinds = {"agent"}
    if len(kinds) > 1:
        raise BindingError(
            f"program: one launch runs kernels of one layout, got env and agent kernels "
            f"({[body.__qualname__ for body in bodies]}); bind them as separate launches (bind_launches)"
        )
    kind = kinds.pop()
    if kind == "agent" and num_agents is None:
        raise BindingError(f"{bodies[0].__qualname__}: an agent kernel needs num_agents, got None")
    description = " + ".join(body.__qualname__ for body in bodies)
    refusal = _check_body_access(
        bodies,
        names,
        checked,
        layouts,
        num_envs,
        num_agents,
        set() if written is None else written,
        {} if needs is None else needs,
    )
    for name in per_call:
        if name not in names:
            names.append(name)  # passed at each call whether or not a body here reads it
    names = [name for name in names if name not in per_call] + list(per_call)
    statements = _positions(statements, {name: index for index, name in enumerate(names)})
    # scalars (params) and scalar types (an env's `real`) become constants of the launcher:
    # fewer arguments to type at each call, and the compiler folds them, as in a hand-written
    # loop. KERNELGYM_PARAMS=arguments passes the scalars instead: one compile for every value
    mode = codegen.params_mode()
    constants = {
        index: checked[name]
        for index, name in enumerate(names)
        if name not in per_call and codegen.is_constant(checked[name], mode)
    }
    index_of = {name: index for index, name in enumerate(names)}
    per_env = {
        index: None if checked[name].stride is None else index_of[_stride_name(name)]
        for index, name in enumerate(names)
        if isinstance(checked.get(name), PerEnvScalar)
    }
    module = codegen.program_launcher_module(
        kind,
        [body._key for body in bodies],
        statements,
        len(names),
        title=description,
        constants=constants,
        num_per_call=len(per_call),
        fast_math=fast_math,
        per_env=per_env,
    )
    args = tuple(
        _launch_value(checked[name])
        for index, name in enumerate(names[: len(names) - len(per_call)])
        if index not in constants
    )
    counts = (num_envs,) if kind == "env" else (num_envs, num_agents)
    if kind == "env":
        threads = max(1, min(kernels.ENV_THREADS_PER_BLOCK, num_envs))
        configuration = (max(1, math.ceil(num_envs / threads)), threads)
    else:
        configuration = kernels.agent_grid(num_envs, num_agents) if num_envs and num_agents else (1, 1)
    if refusal is not None:
        return _Refusal(refusal), names, description, LaunchRecord(description, *configuration, (*counts, *args), ())
    # a per-call value no body here reads is still passed: its template types the launcher
    templates = {
        name: checked[name] if name in checked else kernel_argument(backend, f"value {name!r}", values[name])
        for name in per_call
    }
    record = LaunchRecord(description, *configuration, (*counts, *args), tuple(templates.values()))
    if order is not None:
        return _permuted(module, kind, counts, args, order, statements, description), names, description, record
    if backend == "cpu":
        # below PARALLEL_FROM (env, agent) pairs, entering a parallel region costs more than it
        # saves; where launches run one thread the team's build is never compiled (its parallel
        # passes cost numba twice the serial build's time, minutes for a big program)
        parallel = math.prod(counts) >= PARALLEL_FROM and cpu_threads.team_allowed(strategy)
        launcher = module.cpu_launcher if parallel else module.cpu_serial_launcher

        def built():
            # the arrays packed in one struct, one argument to unbox per call; packing compiles
            # the struct's constructor (seconds for a big program), so a deferred build packs too
            bound = (module.cpu_bind(*args),) if args else ()
            error = _type_check(
                launcher, (*counts, *bound, *templates.values()), names, {**checked, **templates}, description
            )
            return _Refusal(error) if error is not None else _cpu_launch(module, parallel, (*counts, *bound), strategy)

        launch = _FirstLaunchBuild(launcher, counts, built) if deferred else built()
        return launch, names, description, record
    if num_envs == 0 or (kind == "agent" and num_agents == 0):
        return _nothing, names, description, record
    # the simulator's kernel[grid, block] configures the kernel object itself (shared by
    # every binding of this program): configure it anew at each launch
    simulator = simulator_enabled()
    if not simulator:
        register_cuda_overloads()
    # one prebuilt driver launch on torch's current stream, read at each call, where the
    # prebuilt path applies (`kernelgym.core.prebuilt_launch`); numba-cuda's launch otherwise
    launch = prebuilt_launch.device_launch(
        module.cuda_launcher,
        *configuration,
        (*counts, *args),
        tuple(_launch_value(value) for value in templates.values()),
        simulator=simulator,
    )
    return launch, names, description, record


def _cpu_launch(module, parallel: bool, args: tuple, strategy: str | None = None):
    """The cpu launch of ``module`` with ``args`` bound, as `cpu_threads.cpu_threads_strategy`
    of ``strategy`` says: the thread team, the serial twin, or the faster of the two
    (`cpu_threads.AdaptiveLaunch`)."""
    if not parallel:  # few envs, the strategy "one" or one numba thread (`cpu_threads.team_allowed`)
        return functools.partial(module.cpu_serial_launcher, *args)
    if cpu_threads.cpu_threads_strategy(strategy) == "all":
        return functools.partial(module.cpu_launcher, *args)
    return cpu_threads.AdaptiveLaunch(module.cpu_launcher, module.cpu_serial_launcher, args)


def _type_check(launcher, arguments, names, checked, description):
    """Compile ``launcher`` for ``arguments`` now (what its first launch would do). Returns None,
    or for values the bodies cannot take a `kernels.KernelTypingError` naming them (not Numba's
    dump) for the first launch to raise, where Numba raised it before."""
    import numba

    try:
        launcher.compile(tuple(numba.typeof(value) for value in arguments))
    except numba.core.errors.TypingError as error:
        return kernels.typing_error(
            description,
            error,
            names,
            [f"value {name!r}" for name in names],
            [_launch_value(checked[name]) for name in names],
        )
    return None


class _FirstLaunchBuild:
    """A cpu launch whose program compiles at its first call (``bind_launches(compile_at=
    "first_launch")``): then it packs the bound arrays and runs what `_bind_one` would have
    bound, a `_Refusal` for values the bodies cannot type. ``func`` reads as the launch's own
    (``functools.partial``'s); ``args`` holds the counts only (the arrays are packed at the build)."""

    __slots__ = ("func", "args", "_build", "_launch")

    def __init__(self, func, args: tuple, build):
        self.func = func
        self.args = args
        self._build = build
        self._launch = None

    @property
    def built(self) -> bool:
        """Whether the program was compiled (its first launch came)."""
        return self._launch is not None

    def __call__(self, *per_call):
        launch = self._launch
        if launch is None:
            launch = self._launch = self._build()
            self._build = None  # what it held (the module, the templates) is no longer needed
        return launch(*per_call)


class _Refusal:
    """The launch of a program whose values no kernel can take: raises its error, runs nothing."""

    __slots__ = ("error",)

    def __init__(self, error: Exception):
        self.error = error

    def __call__(self, *per_call):
        raise self.error.with_traceback(None)  # not this launch's frames on top of the last one's


def _check_body_access(bodies, names, checked, layouts, num_envs, num_agents, written, needs) -> Exception | None:
    """Check each bound array against what the bodies index and write (`kernelgym.core.extents`);
    note the written names and each array's least leading dims (``needs``). Returns the error
    of a read-only array a body writes, for the first launch to raise (as Numba's compile
    did), or None."""
    access = extents.merged_access(bodies)
    deferred = None
    for name in names:
        value = checked.get(name)
        if (
            isinstance(value, (PerEnvScalar, type))
            or value is None
            or isinstance(value, SCALAR_TYPES)
            or name.endswith(_stride_name(""))
        ):  # a PerEnvScalar's stride, no parameter
            continue
        body_layout = access.layouts.get(name)
        hint = layouts.get(name, "per_env")
        layout = (
            "per_agent"
            if "per_agent" in (body_layout, hint)
            else ("per_env" if "per_env" in (body_layout, hint) else None)
        )
        needed = extents.needed_shape(layout, num_envs, num_agents)
        writes = name in access.written or not access.known
        for item in value if isinstance(value, tuple) else (value,):
            if not isinstance(item, SCALAR_TYPES):
                extents.check_array(f"value {name!r}", item, needed, access.ndims.get(name, 0), writes)
                if writes and deferred is None:
                    deferred = extents.read_only_error(f"value {name!r}", item)
        if writes or name in access.passed:
            written.add(name)
        if len(needed) > len(needs.get(name, ())):
            needs[name] = needed
    if num_envs and num_agents != 0:  # a launch that runs nothing indexes nothing
        shapes = {
            name: tuple(checked[name].shape)
            for name in names
            if hasattr(checked.get(name), "shape") and not isinstance(checked[name], type)
        }
        extents.check_bounds(access, shapes, {name: f"value {name!r}" for name in names})
    return deferred


def _permuted(module, kind, counts, args, order, statements, description):
    """The program's cpu launch in ``order``'s order (see `LaunchOrder`)."""
    if statements and statements[0][0] == "require":
        raise BindingError(
            f"order: the program {description} starts with a Precondition; a LaunchOrder runs programs without one"
        )
    if kind == "agent" and order.num_agents != counts[1]:
        raise ValueError(
            f"order: expected a LaunchOrder of num_agents={counts[1]} for {description}, got {order.num_agents}"
        )
    orders = (order.env_order,) if kind == "env" else (order.env_order, order.agent_order, order.agent_turns)
    bound = (module.cpu_bind(*args),) if args else ()
    return functools.partial(module.cpu_permuted_launcher, *counts, *orders, *bound)


def _positions(statements, index_of) -> list:
    """Statements with value names replaced by launcher argument positions."""
    out: list[tuple] = []
    for statement in statements:
        if statement[0] == "call":
            out.append(("call", statement[1], tuple(index_of[name] for name in statement[2])))
        elif statement[0] == "require":
            _, check, names, fault, record = statement
            if record is not None:
                record = (record[0], tuple(index_of[name] for name in record[1]))
            out.append(("require", check, tuple(index_of[name] for name in names), index_of[fault], record))
        elif statement[0] == "phase":
            out.append(("phase", statement[1], _positions(statement[2], index_of)))
        else:
            _, mask, then, otherwise = statement
            out.append(("if", index_of[mask], _positions(then, index_of), _positions(otherwise, index_of)))
    return out


def check_fast_math(fast_math) -> bool:
    """``fast_math`` as a bool; a TypeError naming it unless it is True or False."""
    if not isinstance(fast_math, (bool, np.bool_)):
        raise TypeError(f"fast_math: expected True or False, got {type(fast_math).__name__} {fast_math!r}")
    return bool(fast_math)


def _nothing(*per_call) -> None:
    """The launch of zero envs."""


def _launch_value(value):
    """What a launcher takes for a checked value: a `PerEnvScalar`'s array itself."""
    return value.array if isinstance(value, PerEnvScalar) else value


def _checked_value(name, value, layout, backend, num_envs, num_agents):
    """``value`` converted for ``backend``, with its extents checked against the launch."""
    if isinstance(value, PerEnvScalar):
        array = kernel_argument(backend, f"value {name!r}", value.array)
        shape = getattr(array, "shape", None)
        if shape is None or len(shape) != 1 or shape[0] < num_envs:
            raise ValueError(
                f"value {name!r}: a PerEnvScalar needs a 1-D array of at least num_envs "
                f"({num_envs}) entries, got {'a scalar' if shape is None else f'shape {tuple(shape)}'}"
            )
        stride = value.stride
        if stride is not None:
            stride = kernel_argument(backend, f"value {name!r} stride", stride)
            if getattr(stride, "shape", None) != (1,) or np.dtype(stride.dtype).kind not in "iu":
                raise ValueError(
                    f"value {name!r}: a PerEnvScalar stride must be a one-element integer array, got {stride!r}"
                )
        return PerEnvScalar(array, stride)
    if isinstance(value, type) and codegen.is_constant(value):
        return value  # a numpy scalar type (e.g. an env's `real`): compiled in as a constant
    value = kernel_argument(backend, f"value {name!r}", value)
    items = value if isinstance(value, tuple) else (value,)
    for item in items:
        shape = None if isinstance(item, SCALAR_TYPES) else getattr(item, "shape", None)
        if shape is None or layout == "shared":
            continue
        layout = layout or "per_env"
        needed = (num_envs,) if layout == "per_env" else (num_envs, num_agents)
        if None in needed:
            raise ValueError(f"value {name!r}: layout {layout!r} needs num_agents, got None")
        if len(shape) < len(needed) or any(have < want for have, want in zip(shape, needed)):
            what = "num_envs rows" if layout == "per_env" else "(num_envs, num_agents) leading dims"
            raise ValueError(
                f"value {name!r}: a {layout} array needs at least {what} {needed}, got shape {tuple(shape)}"
            )
    return value
