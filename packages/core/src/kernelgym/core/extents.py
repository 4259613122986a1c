"""What a launch may touch, read from the kernel body, and checked before any kernel runs.

A GPU thread that indexes past a buffer writes another env's row or memory that is not
the buffer's, silently, and a cpu launcher does the same (Numba checks no bounds): either
may crash the process. So every launch path (`EnvKernel.launch`, `AgentKernel.launch`,
`kernelgym.core.binding.bind`, `FunctionManager.launch`) checks its arrays here first:

- `body_access` reads each body's source once: a parameter indexed ``x[i, ...]`` (env
  kernels) or ``x[env, ...]`` is per env and needs ``num_envs`` rows; ``x[env, agent, ...]``
  is per agent and also needs ``num_agents`` columns; ``atomic_add(x, env, ...)`` and the
  `kernelgym.core.rng` draws (``uniform(states, i)``) index their first argument the same
  way. It also finds the parameters a body writes (stores, ``atomic_add``, rng draws) and
  those it hands to other functions (which may write them). A constant index on any axis
  (``x[i, 2]``) is a bound the array's shape must hold. A write it cannot prove is refused,
  naming the line: at an offset or scaled env index (``x[i - 1]``, ``x[2 * i]``), through a
  local alias (``y = x``), at a local computed from the env index (``j = i + 1; x[j]``), at
  a moved agent index in an agent kernel (``x[env, agent + 1]``), or in a
  ``@device_function`` helper handed a moved env index or moving it itself, down every
  helper it calls in turn.
- `check_array` refuses, naming the argument: a dtype kernels cannot take (big-endian,
  float128, ...), too few dims or rows for what the body indexes, and for written arrays a
  broadcast (stride 0) one, where every env would write the same element; `read_only_error`
  names a read-only array a body writes.
- `check_scalar` refuses what Numba cannot type: ints beyond 64 bits, float128 scalars.
- `check_no_overlap` refuses two arrays, one of them written, that share memory other
  than row for row (``x = a[1:]``, ``y = a[:-1]``: env ``i`` writes what env ``i + 1`` reads,
  a race on a GPU). The same rows under two names (a view of the whole array, a byte view
  of it) are allowed: each env touches its own row either way.
- `TensorWatch` keeps a bound tensor's storage alive and finds, at each launch, a tensor
  re-pointed since bind (``set_``, ``resize_``): a data-pointer compare per tensor.

Checks depend only on what was bound, so `bind` runs them once; a launch checks only its
per-call values (their rows) and its watched tensors, no allocation.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import NamedTuple

import numpy as np

from kernelgym.core.arrays import check_supported_dtype, is_torch_tensor

__all__ = [
    "BodyAccess",
    "body_access",
    "merged_access",
    "check_bounds",
    "check_array",
    "read_only_error",
    "check_scalar",
    "check_no_overlap",
    "needed_shape",
    "TensorWatch",
    "MAX_COUNT",
]

# The largest num_envs / num_agents a launcher can take (an int64 loop bound).
MAX_COUNT = 2**63 - 1
# Calls that index their first argument with their second (an index or a tuple of them) and write it.
_INDEXING_WRITERS = frozenset(
    {"atomic_add", "next_uint64", "uniform", "uniform_range", "uniform_as", "uniform_range_as", "normal", "randint"}
)
# builtins whose result is arithmetic on their arguments: a local computed with one from the env
# index is an index computed from it
_ARITHMETIC_CALLS = frozenset({"abs", "int", "min", "max", "round"})
_HELPER_DEPTH = 8  # helpers of helpers read this deep (Numba inlines no recursion anyway)
_INT_RANGE = (-(2**63), 2**64 - 1)  # int64 and uint64: what Numba types a Python int as


class BodyAccess(NamedTuple):
    """How one body touches its value parameters (see `body_access`).

    Attributes
    ----------
    layouts : dict of str to str
        ``per_env`` or ``per_agent`` for the parameters the body indexes by env (and agent).
    ndims : dict of str to int
        The fewest dims each indexed parameter must have (the longest index tuple).
    written : frozenset of str
        Parameters the body writes (stores, ``atomic_add``, rng draws).
    passed : frozenset of str
        Parameters handed whole to other functions (which may write them).
    bounds : frozenset of tuple
        ``(name, axis, least)``: dim ``axis`` of ``name`` must be at least ``least``, an int
        (``clock[2]`` needs 3 rows) or ``(other, other_axis)`` (``out[i, j]`` in a loop
        ``for j in range(x.shape[1])`` needs ``out.shape[1] >= x.shape[1]``).
    known : bool
        False when the source could not be read (a body typed at a prompt): then every
        array is taken as written, and as per env in an env kernel, per (env, agent) in an
        agent kernel (its agent index is unproven: the agent dim is checked from the layout).
    """

    layouts: dict
    ndims: dict
    written: frozenset
    passed: frozenset
    bounds: frozenset = frozenset()
    known: bool = True


_UNKNOWN = BodyAccess({}, {}, frozenset(), frozenset(), known=False)
_NOTHING = BodyAccess({}, {}, frozenset(), frozenset())


def body_access(kernel) -> BodyAccess:
    """What ``kernel``'s body indexes and writes, read once from its source (cached on it).

    A body that reassigns its env or agent index gives no layouts; one whose source cannot
    be read gives an access that is not `BodyAccess.known` (see there).
    """
    cached = getattr(kernel, "_access", None)
    if cached is None:
        cached = kernel._access = _read_access(kernel)
    return cached


def _read_access(kernel) -> BodyAccess:
    try:
        lines, first_line = inspect.getsourcelines(kernel.py_func)
        source = textwrap.dedent("".join(lines))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError):
        if kernel.kind != "agent":
            return _UNKNOWN
        # the signature stays readable: every value may be indexed [env, agent]
        arrays = tuple(inspect.signature(kernel.py_func).parameters)[3:]
        return _UNKNOWN._replace(layouts=dict.fromkeys(arrays, "per_agent"), ndims=dict.fromkeys(arrays, 2))
    function = next((node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)), None)
    if function is None:
        return _NOTHING
    parameters = [argument.arg for argument in function.args.args]
    leading = 1 if kernel.kind == "env" else 3
    env, agent = parameters[0], (parameters[1] if kernel.kind == "agent" else None)
    values = set(parameters[leading:])
    reassigned = any(
        isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id in (env, agent)
        for node in ast.walk(function)
    )
    layouts: dict[str, str] = {}
    ndims: dict[str, int] = {}
    written: set[str] = set()
    passed: set[str] = set()
    bounds: set[tuple] = set()
    loops = _loop_extents(function, values, reassigned)
    unconditional = _unconditional_nodes(function.body)
    aliases = _aliases(function, values)
    # locals computed from the env or agent index (``j = i + 1``): a write at one is another row's
    from_env = _derived_locals(function, {env}) if not reassigned else {}
    from_agent = _derived_locals(function, {agent}) if agent is not None and not reassigned else {}

    def unproven(node, name: str, how: str) -> ValueError:
        where = f"{kernel.__qualname__} ({inspect.getsourcefile(kernel.py_func)}:{first_line + node.lineno - 1})"
        return ValueError(
            f"{where}: `{ast.get_source_segment(source, node)}` writes {name!r} {how}, which the launch "
            f"check cannot prove inside the array; write the env's own row ({name}[{env}, ...]) through "
            f"the parameter itself, and pass what another row needs as an input array"
        )

    def indexed(name: str, index, store: bool, node) -> None:
        parts = index.elts if isinstance(index, ast.Tuple) else [index]
        ndims[name] = max(ndims.get(name, 0), len(parts))
        if store:
            written.add(name)
            # an env index moved or scaled (x[i - 1], x[i + 1], x[2 * i]) reaches another env's row
            # or past the last one: refused rather than trusted, also when moved through a local
            # (j = i + 1; x[j]) or, in an agent kernel, the agent index (x[env, agent + 1])
            if not reassigned and _moves_index(parts[0], (env, agent)):
                raise unproven(node, name, "at an offset or scaled env index")
            derived = {**from_env, **from_agent}
            local = _local_index(parts[0], derived)
            if local is not None:
                raise unproven(node, name, f"at an index computed from the env index ({local})")
            if agent is not None and len(parts) > 1 and isinstance(parts[0], ast.Name) and parts[0].id == env:
                if _moves_index(parts[1], (agent, *from_agent)):
                    raise unproven(node, name, "at an offset or scaled agent index")
                local = _local_index(parts[1], from_agent)
                if local is not None:
                    raise unproven(node, name, f"at an index computed from the agent index ({local})")
        for axis, part in enumerate(parts if id(node) in unconditional else ()):
            # a constant index (``clock[0]``, ``x[i, 2]``): the caller's array must hold that row
            # or column, whatever the body writes there
            if isinstance(part, ast.Constant) and type(part.value) is int and part.value >= 0:
                bounds.add((name, axis, part.value + 1))
            elif isinstance(part, ast.Name) and part.id in loops:
                bounds.add((name, axis, loops[part.id]))
        if reassigned or not (isinstance(parts[0], ast.Name) and parts[0].id == env):
            return
        per_agent = agent is not None and len(parts) > 1 and isinstance(parts[1], ast.Name) and parts[1].id == agent
        if per_agent or layouts.get(name) != "per_agent":
            layouts[name] = "per_agent" if per_agent else "per_env"

    for node in ast.walk(function):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and isinstance(node.ctx, ast.Store)
        ):
            raise unproven(node, aliases[node.value.id], f"through the local name {node.value.id!r}")
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in values:
            indexed(node.value.id, node.slice, isinstance(node.ctx, ast.Store), node)
        elif isinstance(node, ast.Call):
            callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if not reassigned:
                own_arrays = {name: name for name in values}
                moved = set(from_env) | set(from_agent)
                _check_helper_call(node, kernel.py_func.__globals__, own_arrays, {env, agent}, moved, unproven)
            names = [arg.id for arg in node.args if isinstance(arg, ast.Name) and arg.id in values]
            first = node.args[0] if node.args else None
            if (
                callee in _INDEXING_WRITERS
                and len(node.args) > 1
                and isinstance(first, ast.Name)
                and first.id in values
            ):
                indexed(first.id, node.args[1], True, node)
                names = names[1:]
            passed.update(names)
    return BodyAccess(layouts, ndims, frozenset(written), frozenset(passed - written), frozenset(bounds))


def _helper(func, namespace):
    """The Python function behind a called ``@device_function`` (``f`` or ``module.f``), else None."""
    if isinstance(func, ast.Name):
        target = namespace.get(func.id)
    elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        target = getattr(namespace.get(func.value.id), func.attr, None)
    else:
        return None
    py_func = getattr(target, "py_func", None)
    return py_func if inspect.isfunction(py_func) else None


def _check_helper_call(call, namespace, arrays, indices, moved, unproven, report=None, chain=()) -> None:
    """Refuse a call that hands a ``@device_function`` helper a value array and an env index it
    writes that array at, moved (``put(x, i + 1)`` with ``x[j] = ...``), or that the helper moves
    itself (``x[j - 1] = ...`` with ``j`` the env index, or ``k = j + 1; x[k] = ...``), down every
    helper it calls in turn (``outer(x, i)`` calling ``put(y, j + 1)``).

    ``arrays`` maps the caller's names of value arrays to the kernel's; ``indices`` are the
    caller's names holding the env (or agent) index as it is, ``moved`` those holding one
    moved or computed from it. ``report`` is the kernel's call the refusal names.
    """
    helper = _helper(call.func, namespace)
    report = call if report is None else report
    if helper is None or helper.__qualname__ in chain or len(chain) >= _HELPER_DEPTH:
        return  # a recursive helper, or one too deep: its arrays count as written (``passed``)
    try:
        function = ast.parse(textwrap.dedent(inspect.getsource(helper))).body[0]
    except (OSError, TypeError, SyntaxError, IndexError):
        return  # its source cannot be read: the array counts as written (``passed``)
    if not isinstance(function, ast.FunctionDef):
        return
    parameters = [argument.arg for argument in function.args.args]
    given = dict(zip(parameters, call.args))
    given.update((keyword.arg, keyword.value) for keyword in call.keywords if keyword.arg)
    own = {name: arrays[arg.id] for name, arg in given.items() if isinstance(arg, ast.Name) and arg.id in arrays}
    env_names = {name for name, arg in given.items() if isinstance(arg, ast.Name) and arg.id in indices}
    shifted = {
        name
        for name, arg in given.items()
        if _moves_index(arg, indices | moved) or (isinstance(arg, ast.Name) and arg.id in moved)
    }
    shifted |= set(_derived_locals(function, env_names | shifted))
    chain = (*chain, helper.__qualname__)
    for node in ast.walk(function):
        if isinstance(node, ast.Call):
            _check_helper_call(node, helper.__globals__, own, env_names, shifted, unproven, report, chain)
        if not (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id in own
        ):
            continue
        leading = node.slice.elts[0] if isinstance(node.slice, ast.Tuple) else node.slice
        if (isinstance(leading, ast.Name) and leading.id in shifted) or _moves_index(leading, env_names | shifted):
            where = " -> ".join(chain)
            raise unproven(report, own[node.value.id], f"in {where} at an offset or scaled env index")


def _derived_locals(function, indices) -> dict:
    """Local names computed from ``indices`` by arithmetic (``j = i + 1``, ``k = j * 2``, ``j = i``),
    directly or through another such local: ``{j: "j = i + 1"}``. A value read with an index
    (``j = idx[i]``) is data, not index arithmetic: not followed."""
    indices = {name for name in indices if name is not None}
    derived: dict[str, str] = {}
    while True:
        found = {}
        for node in ast.walk(function):
            targets, value = _assignment(node)
            if value is None or not _uses(value, indices | set(derived)):
                continue
            for target in targets:
                if isinstance(target, ast.Name) and target.id not in indices and target.id not in derived:
                    found[target.id] = f"{target.id} = {ast.unparse(value)}"
        if not found:
            return derived
        derived.update(found)


def _assignment(node):
    """``(targets, value)`` of an assignment, augmented assignment or for loop, else ``((), None)``."""
    if isinstance(node, ast.Assign):
        return node.targets, node.value
    if isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
        return [node.target], node.value
    if isinstance(node, ast.For):
        return [node.target], node.iter
    return (), None


def _uses(expression, names) -> bool:
    """Whether ``expression`` computes with one of ``names``: by arithmetic, or in `_ARITHMETIC_CALLS`
    (``min(i + 1, n)``). A subscript (``idx[i]``) or another call (``agent_stream(env, agent, n)``,
    a search over the data) gives data, which the check leaves to the kernel as it does ``x[idx[i]]``."""
    if isinstance(expression, ast.Name):
        return expression.id in names
    if isinstance(expression, ast.Subscript):
        return False
    if isinstance(expression, ast.Call):
        arithmetic = isinstance(expression.func, ast.Name) and expression.func.id in _ARITHMETIC_CALLS
        return arithmetic and any(_uses(argument, names) for argument in expression.args)
    return any(_uses(child, names) for child in ast.iter_child_nodes(expression))


def _local_index(index, derived: dict) -> str | None:
    """How a leading index computed from the env (or agent) index came about, when it is such a local
    (``j``) or arithmetic on one (``j + 1``), else None."""
    if isinstance(index, ast.Name):
        return f"`{derived[index.id]}`" if index.id in derived else None
    if isinstance(index, ast.Subscript):
        return None  # an index read from data (``x[idx[j]]``) is not proven either way: not refused
    return next(filter(None, (_local_index(child, derived) for child in ast.iter_child_nodes(index))), None)


def _moves_index(index, names) -> bool:
    """Whether ``index`` is arithmetic on the env (or agent) index: ``i - 1``, ``i + k``, ``2 * i``."""
    return isinstance(index, ast.BinOp) and any(
        isinstance(node, ast.Name) and node.id in names for node in ast.walk(index)
    )


def _aliases(function, values) -> dict:
    """Local names bound to a value parameter (``y = x``): ``{y: x}``."""
    return {
        target.id: node.value.id
        for node in ast.walk(function)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in values
        for target in node.targets
        if isinstance(target, ast.Name) and target.id not in values
    }


def _unconditional_nodes(statements) -> set:
    """The ids of the nodes every run of ``statements`` evaluates: loop bodies count; if, while,
    try and with bodies do not (an index there may be guarded by the data), nor anything after
    a statement that may leave early (return, break, continue, raise)."""
    nodes: set[int] = set()
    for statement in statements:
        leaves = any(isinstance(node, (ast.Return, ast.Break, ast.Continue, ast.Raise)) for node in ast.walk(statement))
        if isinstance(statement, ast.For):
            nodes.update(id(node) for node in ast.walk(statement.iter))
            nodes |= _unconditional_nodes(statement.body)
        elif isinstance(statement, (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return)):
            nodes.update(id(node) for node in ast.walk(statement))
        if leaves:
            break
    return nodes


def _loop_extents(function, values, reassigned) -> dict:
    """Loop variables bounded by a parameter's dim: ``{j: (x, 1)}`` for ``for j in range(x.shape[1])``
    (a variable also assigned elsewhere is left out)."""
    loops: dict[str, tuple[str, int]] = {}
    stores: dict[str, int] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            stores[node.id] = stores.get(node.id, 0) + 1
        if not (
            isinstance(node, ast.For)
            and isinstance(node.target, ast.Name)
            and isinstance(node.iter, ast.Call)
            and getattr(node.iter.func, "id", None) == "range"
            and len(node.iter.args) == 1
        ):
            continue
        bound = node.iter.args[0]
        if (
            isinstance(bound, ast.Subscript)
            and isinstance(bound.value, ast.Attribute)
            and bound.value.attr == "shape"
            and isinstance(bound.value.value, ast.Name)
            and bound.value.value.id in values
            and isinstance(bound.slice, ast.Constant)
            and type(bound.slice.value) is int
        ):
            loops[node.target.id] = (bound.value.value.id, bound.slice.value)
    return {} if reassigned else {name: extent for name, extent in loops.items() if stores.get(name) == 1}


def merged_access(kernels) -> BodyAccess:
    """One `BodyAccess` for bodies that share a launch (the strictest need of each name)."""
    layouts: dict[str, str] = {}
    ndims: dict[str, int] = {}
    written: set[str] = set()
    passed: set[str] = set()
    bounds: set[tuple] = set()
    known = True
    for kernel in kernels:
        access = body_access(kernel)
        known = known and access.known
        for name, layout in access.layouts.items():
            if layouts.get(name) != "per_agent":
                layouts[name] = layout
        for name, ndim in access.ndims.items():
            ndims[name] = max(ndims.get(name, 0), ndim)
        written |= access.written
        passed |= access.passed
        bounds |= access.bounds
    return BodyAccess(layouts, ndims, frozenset(written), frozenset(passed - written), frozenset(bounds), known)


def check_bounds(access: BodyAccess, shapes: dict, labels: dict) -> None:
    """Refuse arrays too small for the body's constant indices and loops (`BodyAccess.bounds`);
    ``shapes`` and ``labels`` map parameter names to the bound arrays' shapes and labels
    (call it only for launches that run at least one env and agent)."""
    for name, axis, least in sorted(access.bounds, key=repr):
        shape = shapes.get(name)
        if shape is None or axis >= len(shape):
            continue  # a scalar, or too few dims (check_array says so)
        if isinstance(least, tuple):
            other = shapes.get(least[0])
            if other is None or least[1] >= len(other):
                continue
            if shape[axis] < other[least[1]]:
                raise ValueError(
                    f"{labels[name]}: expected dim {axis} >= dim {least[1]} of {labels[least[0]]} "
                    f"({other[least[1]]}; the kernel loops over that dim to index this one), got shape {shape}"
                )
        elif shape[axis] < least:
            raise ValueError(
                f"{labels[name]}: expected dim {axis} of at least {least} (the kernel indexes it at "
                f"{least - 1}), got shape {shape}"
            )


def needed_shape(layout, num_envs: int, num_agents) -> tuple:
    """The least leading dims of a ``layout`` array: ``()`` for shared or unknown ones."""
    if layout == "per_env":
        return (num_envs,)
    if layout == "per_agent":
        return (num_envs, num_agents if num_envs else 0)  # no env: no agent runs
    return ()


def _numpy_view(array):
    """A numpy array over ``array``'s memory (numpy, simulator or CPU tensor), else None."""
    if isinstance(array, np.ndarray):
        return array
    buffer = getattr(array, "_ary", None)  # a simulator device array's host buffer
    return buffer if isinstance(buffer, np.ndarray) else None


def check_array(label: str, array, needed: tuple = (), ndim: int = 0, written: bool = False) -> None:
    """Refuse ``array`` (``label`` names it) unless a launch can use it as the body does.

    Parameters
    ----------
    needed : tuple of int
        The least leading dims (`needed_shape`).
    ndim : int
        The fewest dims the body's indexing needs.
    written : bool
        Whether the body writes it: then it must not be broadcast (see also `read_only_error`).

    Raises
    ------
    TypeError
        A dtype kernels cannot take.
    ValueError
        Too few dims or rows, or a broadcast array the body writes.
    """
    shape = tuple(array.shape)
    dtype = getattr(array, "dtype", None)
    if dtype is not None:
        check_supported_dtype(label, dtype)
    least = max(len(needed), ndim)
    if len(shape) < least:
        raise ValueError(
            f"{label}: the kernel indexes it with {least} indices, so it needs at least {least} dims, got shape {shape}"
        )
    if any(have < want for have, want in zip(shape, needed)):
        what = "num_envs rows" if len(needed) == 1 else "(num_envs, num_agents) leading dims"
        raise ValueError(
            f"{label}: expected at least {what} {needed} (the kernel indexes it by env"
            f"{'' if len(needed) == 1 else ' and agent'}), got shape {shape}"
        )
    view = _numpy_view(array)
    if not written or view is None:
        return
    if view.size and any(stride == 0 and size > 1 for stride, size in zip(view.strides, view.shape)):
        raise ValueError(
            f"{label}: the kernel writes it, got a broadcast array (strides {view.strides}) whose "
            "rows share memory; pass a copy: np.array(value)"
        )


def read_only_error(label: str, array) -> TypeError | None:
    """The TypeError for a read-only ``array`` a kernel writes (Numba cannot compile the
    store), or None: a launch raises it, `bind` at the first launch (when Numba would)."""
    view = _numpy_view(array)
    if view is None or view.flags.writeable:
        return None
    return TypeError(
        f"{label}: the kernel writes it, so it must be writable, got a read-only array (pass a copy: np.array(value))"
    )


def check_scalar(label: str, value) -> None:
    """Refuse a scalar Numba cannot type (``label`` names it): ints beyond 64 bits, float128."""
    if isinstance(value, (bool, np.bool_)):
        return
    if isinstance(value, int) and not _INT_RANGE[0] <= value <= _INT_RANGE[1]:
        raise ValueError(
            f"{label}: expected an int in the int64/uint64 range [{_INT_RANGE[0]}, {_INT_RANGE[1]}], got {value}"
        )
    if isinstance(value, np.generic):
        check_supported_dtype(label, value.dtype)


def _extent(array) -> tuple[int, int, int, int] | None:
    """``(start, stop, row_stride, base)`` byte addresses of ``array``'s memory, or None."""
    interface = getattr(array, "__cuda_array_interface__", None)
    view = _numpy_view(array)
    if view is not None:
        base, shape, strides, itemsize = view.ctypes.data, view.shape, view.strides, view.itemsize
    elif interface is not None:
        base, shape = interface["data"][0], tuple(interface["shape"])
        itemsize = np.dtype(interface["typestr"]).itemsize
        strides = interface.get("strides") or tuple(
            int(np.prod(shape[k + 1 :], dtype=np.int64)) * itemsize for k in range(len(shape))
        )
    else:
        return None
    if 0 in shape:
        return None
    low = base + sum(min(0, (size - 1) * stride) for size, stride in zip(shape, strides))
    high = base + sum(max(0, (size - 1) * stride) for size, stride in zip(shape, strides)) + itemsize
    return low, high, (strides[0] if shape else 0), base


def _row_aligned(a, b, extent_a, extent_b) -> bool:
    """Whether ``a`` and ``b`` hold each env's row in the same place (row i of one overlaps
    only row i of the other), so the envs' threads never touch each other's memory."""
    stride = extent_a[2]
    if not (a.shape and b.shape) or stride <= 0 or extent_b[2] != stride:
        return False
    origin = min(extent_a[3], extent_b[3])
    for extent, array in ((extent_a, a), (extent_b, b)):
        rows = array.shape[0]
        row_low = extent[0] - origin
        row_high = extent[1] - (rows - 1) * stride - origin
        if row_low < 0 or row_high > stride:
            return False
    return True


def _shares_memory(a, b, extent_a, extent_b) -> bool:
    if extent_a[1] <= extent_b[0] or extent_b[1] <= extent_a[0]:
        return False
    view_a, view_b = _numpy_view(a), _numpy_view(b)
    if view_a is None or view_b is None:
        return True  # device arrays: overlapping address ranges
    try:
        # numpy's stubs allow max_work -1 or 0 only; numpy itself takes any bound on the work
        return bool(np.shares_memory(view_a, view_b, max_work=10**5))  # type: ignore[arg-type]
    except np.exceptions.TooHardError:
        return True


def check_no_overlap(arrays: dict, written) -> None:
    """Refuse two arrays of ``arrays`` (label -> array), one of them ``written`` (labels),
    that share memory other than row for row; the ValueError names both."""
    items = [(label, array, _extent(array)) for label, array in arrays.items()]
    items = [item for item in items if item[2] is not None]
    for k, (label_a, a, extent_a) in enumerate(items):
        for label_b, b, extent_b in items[k + 1 :]:
            if label_a not in written and label_b not in written:
                continue
            if _shares_memory(a, b, extent_a, extent_b) and not _row_aligned(a, b, extent_a, extent_b):
                raise ValueError(
                    f"{label_a} and {label_b}: they share memory at different rows (e.g. a[1:] and a[:-1]), and the "
                    "kernel writes one of them: envs would race on each other's rows; pass separate arrays"
                )


class TensorWatch:
    """Bound tensors, kept alive, and the data pointers they had at bind time."""

    __slots__ = ("_storages", "_tensors")

    def __init__(self):
        self._tensors = []  # (label, tensor, data pointer)
        self._storages = []  # the bound memory stays allocated even if a tensor lets go of it

    def __bool__(self):
        return bool(self._tensors)

    def add(self, label: str, value) -> None:
        """Watch ``value`` (and each tensor of a tuple) if it is a torch tensor."""
        for item in value if isinstance(value, tuple) else (value,):
            if is_torch_tensor(item):
                self._tensors.append((label, item, item.data_ptr()))
                self._storages.append(item.untyped_storage())

    def check(self) -> None:
        """Raise a ValueError naming a tensor re-pointed since bind (``set_``, ``resize_``)."""
        for label, tensor, pointer in self._tensors:
            if tensor.data_ptr() != pointer:
                raise ValueError(
                    f"{label}: the tensor was re-pointed after bind (set_ or resize_: data moved from {pointer:#x} to "
                    f"{tensor.data_ptr():#x}); the launch would write its old memory: bind again"
                )
