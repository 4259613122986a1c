"""Where a NaN or inf comes from: replay an env's kernel source for one env, line by line.

A GPU writes NaN or inf silently (so do the cpu and sim twins, see
`kernelgym.core.device_functions`), and the checks see only the result. To point at the
env's own code, `locate_nonfinite` runs the Python source of the kernels that produced
it (``kernel.py_func``) for that env, on host copies of the env's inputs bound by name
as the runtime binds them, under a line tracer: the first line of an env kernel after
which a local value or a kernel array holds a NaN or inf that was not there before (or
that raised an arithmetic error in Python) is where it arises. The `device_function`
helpers the kernel calls from the env's own modules are followed: their source runs under
the tracer too, so a NaN made in a helper is reported at the helper's line. The source runs
with numba's scalar semantics (`kernelgym.core.python_semantics`: ``math.sqrt(-1.0)`` is NaN,
as compiled, not a ``ValueError``). `locate_writes` replays the same way to name the line
that last wrote an array that differs from the reference.
"""

from __future__ import annotations

import functools
import inspect
import linecache
import os
import sys
import traceback

import numpy as np

from kernelgym.core import binding
from kernelgym.core.device_functions import DeviceFunction
from kernelgym.core.python_semantics import numba_semantics
from kernelgym.envs.runtime.names import kernel_values
from kernelgym.envs.runtime.streams import stream_table
from kernelgym.envs.spec import resolve_precision

__all__ = [
    "agent_writers",
    "kernel_definition",
    "locate_differences",
    "locate_nonfinite",
    "locate_writes",
    "nonfinite_arrays",
]


def nonfinite_arrays(arrays: dict) -> list[str]:
    """Names of the float arrays (or scalars) in ``arrays`` that hold a NaN or inf."""
    return [name for name, value in arrays.items() if _nonfinite_count(value)]


def kernel_definition(kernel) -> str:
    """``qualname (file:line)`` of a write-once kernel's Python function."""
    function = kernel.py_func
    try:
        line = inspect.getsourcelines(function)[1]
    except (OSError, TypeError):
        line = function.__code__.co_firstlineno
    return f"{function.__qualname__} ({inspect.getsourcefile(function) or function.__code__.co_filename}:{line})"


def _replay_inputs(harness, kernel_field: str, state: dict, actions, rng_states):
    """The kernels of ``kernel_field`` and the values they bind, as host copies of the launch's inputs."""
    spec = harness.spec
    kernels = spec.load_kernels(kernel_field)
    num_envs = np.shape(actions)[0]
    buffers = {
        "actions": np.array(actions),
        # bound as kernels bind it: one row per stream (an agent-layout env's (envs, agents, 2) flattened)
        "rng_states": stream_table(np.array(rng_states, dtype=np.uint64)),
        **harness.obs_buffers(num_envs),
        "rewards": np.zeros((num_envs, *harness.agent_shape), np.float32),
        "terminated": np.zeros(num_envs, np.bool_),
    }
    # A NaN already in the input would hide the line that writes one; the checks report the
    # first launch that shows a NaN, so its inputs are finite, except the state a reset
    # overwrites (the state it left, when the check saw only that): start those at 0.
    arrays = {name: _finite_or_zero(np.array(state[name], dtype=dtype)) for name, dtype in harness.state_dtypes.items()}
    values = kernel_values(spec, harness.params, buffers, arrays, resolve_precision(spec, harness.precision))
    return kernels, values


def _layouts(harness, index: int) -> list[tuple]:
    if harness.spec.kernel_layout == "env":
        return [(index,)]
    return [(index, agent, harness.num_agents) for agent in range(harness.num_agents)]


def _replay(tracer, harness, kernels, values, index: int) -> str | None:
    """Run each kernel's source for env ``index`` under ``tracer`` (phases in order, the agents of
    each in order, as the cpu build runs them); what the tracer found, or None."""
    for kernel in kernels:
        # a float bound into the launcher is a float64 to numba (as DeviceFunction makes it in the simulator)
        arguments = [
            np.float64(value) if type(value) is float else value
            for value in (values[name] for name in binding.parameter_names(kernel))
        ]
        for layout in _layouts(harness, index):
            found = tracer.run(kernel, *layout, *arguments)
            if found:
                return found
    return None


def locate_nonfinite(harness, kernel_field: str, state: dict, actions, rng_states, index: int) -> str:
    """Say where env ``index``'s NaN or inf arises in ``kernel_field``'s kernels.

    Parameters
    ----------
    harness : EnvHarness
    kernel_field : {"step_kernel", "reset_kernel"}
        The kernels that ran for the env (a pending env was reset, not stepped).
    state : dict of (num_envs, ...) arrays
        The batch's state before the launch.
    actions : numpy.ndarray
        The batch's actions of the launch.
    rng_states : numpy.ndarray
        The batch's ``(num_envs, 2)`` RNG streams before the launch.
    index : int
        The env.

    Returns
    -------
    str
        ``"NaN/inf arises in <function> at <file>:<line>: <source> (<what>)"``, where the
        function is the kernel or a `device_function` it calls (followed into, with the
        kernel named), or, when the replay does not find the line, the kernels' names and
        definitions.
    """
    kernels, values = _replay_inputs(harness, kernel_field, state, actions, rng_states)
    watched = {name: value for name, value in values.items() if isinstance(value, np.ndarray)}
    why = "the replay of their source for this env found no line"
    try:
        found = _replay(_Tracer(watched), harness, kernels, values, index)
        if found:
            return f"NaN/inf arises in {found}"
    except Exception as error:
        why = f"the replay of their source for this env raised {type(error).__name__}: {error}"
    return f"NaN/inf written by {' or '.join(kernel_definition(kernel) for kernel in kernels)} ({why})"


def locate_writes(harness, kernel_field: str, state: dict, actions, rng_states, index: int, names) -> dict[str, str]:
    """The line of ``kernel_field``'s kernels (or their device functions) that last wrote each array of
    ``names`` for env ``index``, replaying their source (arguments as `locate_nonfinite`).

    Returns
    -------
    dict
        ``{name: "<function> at <file>:<line>: `<source>`"}`` for the arrays the replay saw
        written (a name it did not see written, or a replay that raised, is left out).
    """
    kernels, values = _replay_inputs(harness, kernel_field, state, actions, rng_states)
    tracer = _WriteTracer({name: values[name] for name in names if isinstance(values.get(name), np.ndarray)}, index)
    try:
        _replay(tracer, harness, kernels, values, index)
    except Exception:  # an unreplayable kernel: the caller names the kernels instead
        return {}
    return tracer.writers


def locate_differences(harness, kernel_field: str, state: dict, actions, rng_states, index: int, problems) -> list[str]:
    """For env ``index``'s ``problems`` (texts of `EnvHarness.step_problems` and the like): the line
    that last wrote each array they name, from a replay of the launch (arguments as `locate_nonfinite`).

    Returns
    -------
    list of str
        ``"<array> last written by <function> at <file>:<line>: `<source>`"`` per array the
        replay saw written; else one line naming the kernels.
    """
    text = " ".join(problems)
    names = [name for name in harness.state_dtypes if f"state {name!r}" in text]
    names += list(harness.obs_buffers(1)) if "observation" in text else []
    names += [name for name, word in (("rewards", "reward"), ("terminated", "terminated")) if word in text]
    writers = locate_writes(harness, kernel_field, state, actions, rng_states, index, names)
    if not writers:
        kernels = harness.spec.load_kernels(kernel_field)
        return [f"written by {' or '.join(kernel_definition(kernel) for kernel in kernels)}"]
    return [f"{name} last written by {line}" for name, line in writers.items()]


def agent_writers(harness, kernel, arrays: dict, env: int, name: str, element: tuple | None = None) -> list[str]:
    """The lines of an agent kernel (or its device functions) that write env ``env``'s row of array
    ``name`` (or its ``element``), replaying each of the env's agents in order from ``arrays``
    (host copies, by the names kernels bind; copied here). Empty when the replay raised."""
    copies = {key: np.array(value) for key, value in arrays.items()}
    watched = {name: copies[name]}  # in the shape ``element`` indexes; the kernels write it through a view
    copies["rng_states"] = stream_table(copies["rng_states"])  # as kernels bind it (a compiled draw indexes it)
    values = kernel_values(harness.spec, harness.params, copies, {}, resolve_precision(harness.spec, harness.precision))
    arguments = [
        np.float64(value) if type(value) is float else value
        for value in (values[key] for key in binding.parameter_names(kernel))
    ]
    tracer = _WriteTracer(watched, env if element is None else element, every=True)
    try:
        for agent in range(harness.num_agents):
            tracer.run(kernel, env, agent, harness.num_agents, *arguments)
    except Exception:  # an unreplayable kernel: the caller names the kernel alone
        return []
    return tracer.lines


def user_frame(error: BaseException) -> str | None:
    """``"<file>:<line> in <function>: `<source>`"`` of the innermost frame of ``error``'s traceback
    outside numba, numpy, hypothesis and kernelgym's runtime and kit: the user's kernel line
    where the simulator's own bounds check (in numba's ``devicearray.py``) raised, for one.
    None when every frame is theirs."""
    frames = traceback.extract_tb(error.__traceback__)
    for frame in reversed(frames):
        if not frame.filename.startswith(_library_folders()):
            return f"{frame.filename}:{frame.lineno} in {frame.name}: `{(frame.line or '').strip()}`"
    return None


@functools.cache
def _library_folders() -> tuple[str, ...]:
    """Folders of the code between a user's kernel and an error: numba (numba-cuda's simulator
    too, which numba.cuda redirects to), numpy, hypothesis, kernelgym's runtime and this kit."""
    import hypothesis
    import numba
    from numba import cuda  # through kernelgym-core's numba-cuda, as the runtime imports it

    import kernelgym.core
    import kernelgym.envs.runtime
    import kernelgym.envs.testing

    modules = (numba, cuda, np, hypothesis, kernelgym.envs.runtime, kernelgym.envs.testing)
    folders = [os.path.dirname(module.__file__) for module in modules if module.__file__]
    folders += list(kernelgym.core.__path__)
    return tuple(os.path.join(folder, "") for folder in folders)


# ------------------------------------------------------------------ source replays
_ORIGINALS: dict = {}  # the code of a replayed function -> the user's function it was made from


def _python_function(function):
    """``function`` (a kernel's or device function's ``py_func``) as it runs in a replay: with numba's
    scalar semantics, and the user's device functions it calls as Python too, so a tracer sees their lines."""
    made = numba_semantics(function, _user_helper)
    _ORIGINALS[made.__code__] = function
    return made


def _user_helper(name, value):
    """A device function outside kernelgym.core as Python (the kit follows NaNs into it), else None."""
    if isinstance(value, DeviceFunction) and not value.py_func.__module__.startswith("kernelgym.core"):
        return _python_function(value.py_func)
    return None


class _SourceTracer:
    """Runs a kernel's Python source (and its device functions') and calls ``_line`` after each line."""

    def __init__(self):
        self.found: str | None = None
        self.kernel = None

    def run(self, kernel, *args) -> str | None:
        self.kernel = kernel
        function = _python_function(kernel.py_func)
        previous = sys.gettrace()
        sys.settrace(self._global)
        try:
            with np.errstate(all="ignore"):
                function(*args)
        except ArithmeticError:
            pass  # a Python division by zero: the tracer saw the line raise
        finally:
            sys.settrace(previous)
        return self.found

    def _global(self, frame, event, arg):
        if frame.f_code not in _ORIGINALS or self.found:
            return None
        state = self._enter(frame)
        line = [frame.f_lineno]

        def local(frame, event, arg):
            if self.found:
                return None
            if event == "exception" and issubclass(arg[0], ArithmeticError):
                self._report(frame, frame.f_lineno, f"raised {arg[0].__name__}: {arg[1]}")
                return None
            if event in ("line", "return"):
                self._line(frame, line[0], state)
                line[0] = frame.f_lineno
            if event == "return" and not self.found:
                self._returned(frame, line[0], arg)
            return local

        return local

    def _enter(self, frame):
        return None

    def _line(self, frame, line: int, state) -> None:
        raise NotImplementedError

    def _returned(self, frame, line: int, value) -> None:
        """A traced function (a device function, for one) returns ``value`` from ``line``."""

    def _where(self, frame, line: int) -> str:
        function = _ORIGINALS[frame.f_code]
        source = linecache.getline(frame.f_code.co_filename, line).strip()
        text = f"{function.__qualname__} at {frame.f_code.co_filename}:{line}: `{source}`"
        if function is not self.kernel.py_func:
            text += f" (a device function the kernel {self.kernel.py_func.__qualname__} calls)"
        return text

    def _report(self, frame, line: int, what: str) -> None:
        self.found = f"{self._where(frame, line)} ({what}); the kernel is {kernel_definition(self.kernel)}"


class _Tracer(_SourceTracer):
    """Finds the first line that makes a local value or a kernel array non-finite."""

    def __init__(self, arrays: dict):
        super().__init__()
        self.arrays = arrays
        self.counts = {name: _nonfinite_count(value) for name, value in arrays.items()}

    def _enter(self, frame):
        # a non-finite argument came from the caller, which is where it arose
        return {name for name, value in frame.f_locals.items() if _is_nonfinite_scalar(value)}

    def _line(self, frame, line: int, locals_seen) -> None:
        what = self._new_nonfinite(frame, locals_seen)
        if what:
            self._report(frame, line, what)

    def _returned(self, frame, line: int, value) -> None:
        # `return math.sqrt(x)`: the NaN is made on the return line, in no local
        values = value if isinstance(value, tuple) else (value,)
        if any(_is_nonfinite_scalar(item) for item in values) and _ORIGINALS[frame.f_code] is not self.kernel.py_func:
            self._report(frame, line, f"returned {value}")

    def _new_nonfinite(self, frame, locals_seen: set) -> str | None:
        for name, value in frame.f_locals.items():
            if name not in locals_seen and _is_nonfinite_scalar(value):
                return f"local {name!r} = {value}"
        for name, array in self.arrays.items():
            count = _nonfinite_count(array)
            if count > self.counts[name]:
                return f"array {name!r} got a NaN or inf"
        return None


class _WriteTracer(_SourceTracer):
    """Records, per watched array, the last line that changed its part ``index`` (an env's row, or an
    element); with ``every``, each distinct line that did, in order, in ``lines``."""

    def __init__(self, arrays: dict, index, every: bool = False):
        super().__init__()
        self.arrays, self.index, self.every = arrays, index, every
        self.rows = {name: self._row(name) for name in arrays}
        self.writers: dict[str, str] = {}
        self.lines: list[str] = []

    def _row(self, name: str) -> bytes:
        return np.asarray(self.arrays[name][self.index]).tobytes()

    def _line(self, frame, line: int, state) -> None:
        for name in self.arrays:
            row = self._row(name)
            if row != self.rows[name]:
                self.rows[name] = row
                self.writers[name] = where = self._where(frame, line)
                if self.every and where not in self.lines:
                    self.lines.append(where)


def _is_nonfinite_scalar(value) -> bool:
    return isinstance(value, (float, np.floating, np.complexfloating)) and not np.isfinite(value)


def _finite_or_zero(array: np.ndarray) -> np.ndarray:
    if array.dtype.kind in "fc":
        array[~np.isfinite(array)] = 0
    return array


def _nonfinite_count(value) -> int:
    value = np.asarray(value)
    if value.dtype.kind not in "fc":
        return 0
    return int(np.count_nonzero(~np.isfinite(value)))
