"""Where a NaN or inf comes from: replay an env's kernel source for one env, line by line.

A GPU writes NaN or inf silently (so do the cpu and sim twins, see
`kernelgym.core.device_functions`), and the checks see only the result. To point at the
env's own code, `locate_nonfinite` runs the Python source of the kernels that produced
it (``kernel.py_func``) for that env, on host copies of the env's inputs bound by name
as the runtime binds them, under a line tracer: the first line of an env kernel after
which a local value or a kernel array holds a NaN or inf that was not there before (or
that raised an arithmetic error in Python) is where it arises. Helpers the kernel calls
run compiled, so the line is the kernel's own line that calls them.
"""

from __future__ import annotations

import inspect
import linecache
import sys

import numpy as np

from kernelgym.core import binding
from kernelgym.envs.runtime.names import kernel_values
from kernelgym.envs.spec import resolve_precision

__all__ = ["kernel_definition", "locate_nonfinite", "nonfinite_arrays"]


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
        ``"NaN/inf arises in <kernel> at <file>:<line>: <source> (<what>)"``, or, when
        the replay does not find the line, the kernels' names and definitions.
    """
    spec = harness.spec
    kernels = spec.load_kernels(kernel_field)
    num_envs = np.shape(actions)[0]
    buffers = {
        "actions": np.array(actions),
        "rng_states": np.array(rng_states, dtype=np.uint64),
        **harness.obs_buffers(num_envs),
        "rewards": np.zeros((num_envs, *harness.agent_shape), np.float32),
        "terminated": np.zeros(num_envs, np.bool_),
    }
    # A NaN already in the input would hide the line that writes one; the checks report the
    # first launch that shows a NaN, so its inputs are finite, except the state a reset
    # overwrites (the state it left, when the check saw only that): start those at 0.
    arrays = {name: _finite_or_zero(np.array(state[name], dtype=dtype)) for name, dtype in harness.state_dtypes.items()}
    values = kernel_values(spec, harness.params, buffers, arrays, resolve_precision(spec, harness.precision))
    watched = {name: value for name, value in values.items() if isinstance(value, np.ndarray)}
    tracer = _Tracer(kernels, watched)
    layouts = (
        [(index,)]
        if spec.kernel_layout == "env"
        else [(index, agent, harness.num_agents) for agent in range(harness.num_agents)]
    )
    why = "the replay of their source for this env found no line"
    try:
        for kernel in kernels:  # phases in order, the agents of each in order (as the cpu build runs them)
            arguments = [values[name] for name in binding.parameter_names(kernel)]
            for layout in layouts:
                found = tracer.run(kernel, *layout, *arguments)
                if found:
                    return f"NaN/inf arises in {found}"
    except Exception as error:
        why = f"the replay of their source for this env raised {type(error).__name__}: {error}"
    return f"NaN/inf written by {' or '.join(kernel_definition(kernel) for kernel in kernels)} ({why})"


class _Tracer:
    """Runs a kernel's Python function and finds the first line that makes a value non-finite."""

    def __init__(self, kernels, arrays: dict):
        self.codes = {kernel.py_func.__code__: kernel for kernel in kernels}
        self.arrays = arrays
        self.counts = {name: _nonfinite_count(value) for name, value in arrays.items()}
        self.found: str | None = None

    def run(self, kernel, *args) -> str | None:
        previous = sys.gettrace()
        sys.settrace(self._global)
        try:
            with np.errstate(all="ignore"):
                kernel.py_func(*args)
        except ArithmeticError:
            pass  # a Python division by zero: the tracer saw the line raise
        finally:
            sys.settrace(previous)
        return self.found

    def _global(self, frame, event, arg):
        if frame.f_code not in self.codes or self.found:
            return None
        locals_seen = {name for name, value in frame.f_locals.items() if _is_nonfinite_scalar(value)}
        line = [frame.f_lineno]

        def local(frame, event, arg):
            if self.found:
                return None
            if event == "exception" and issubclass(arg[0], ArithmeticError):
                self._report(frame, frame.f_lineno, f"raised {arg[0].__name__}: {arg[1]}")
                return None
            if event in ("line", "return"):
                what = self._new_nonfinite(frame, locals_seen)
                if what:
                    self._report(frame, line[0], what)
                    return None
                line[0] = frame.f_lineno
            return local

        return local

    def _new_nonfinite(self, frame, locals_seen: set) -> str | None:
        for name, value in frame.f_locals.items():
            if name not in locals_seen and _is_nonfinite_scalar(value):
                return f"local {name!r} = {value}"
        for name, array in self.arrays.items():
            count = _nonfinite_count(array)
            if count > self.counts[name]:
                return f"array {name!r} got a NaN or inf"
        return None

    def _report(self, frame, line: int, what: str) -> None:
        kernel = self.codes[frame.f_code]
        source = linecache.getline(frame.f_code.co_filename, line).strip()
        self.found = (
            f"{kernel.py_func.__qualname__} at {frame.f_code.co_filename}:{line}: `{source}` ({what}); "
            f"the kernel is {kernel_definition(kernel)}"
        )


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
