"""A kernel function's Python source run with the scalar typing and errors of its compiled code.

The CUDA simulator, and the kit's line-by-line replays of a kernel, run a kernel's Python
source, where Python's rules differ from numba's in ways that change results:

- numba types a float literal as float64, so ``0.01 * u`` is float64 for a float32 ``u``;
  under NumPy 2 a Python float is "weak" and ``0.01 * np.float32(u)`` stays float32;
- ``min(max(u, -1.0), 1.0)`` is float64 in numba whichever argument it returns; in Python
  it is the argument itself, a Python float on one branch and ``np.float32`` on the other;
- ``math.sqrt(-1.0)`` is NaN in numba (and on the GPU) but raises ``ValueError`` in
  Python, and ``math.exp(1000.0)`` is inf but raises ``OverflowError``; numba's
  ``math.sqrt`` of a float32 is a float32, Python's a Python float.

`numba_semantics` returns the function with those parts as numba has them: its float
literals are float64 scalars, ``min``/``max`` return the type numba unifies their arguments
to, and ``math``'s float functions give NaN or inf instead of raising and return numpy
scalars of numba's result type. Integer literals keep NumPy's typing: numba types them
int64, which would change ``x ** 2`` (float32 in numba) if they were made int64 here.
"""

from __future__ import annotations

import builtins
import math
import types

import numpy as np

__all__ = ["numba_semantics"]

# math's functions that return a float: NaN for a domain error and inf for an overflow in numba
_FLOAT_FUNCTIONS = (
    "acos acosh asin asinh atan atan2 atanh copysign cos cosh degrees erf erfc exp expm1 fabs fmod gamma "
    "hypot lgamma log log10 log1p log2 pow radians sin sinh sqrt tan tanh"
).split()
_cache: dict = {}


def _numba_dtype(value) -> np.dtype | None:
    """The dtype numba gives a scalar (a Python float is float64, an int int64), None for a non-number."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, np.number):
        return value.dtype
    if isinstance(value, float):
        return np.dtype(np.float64)
    if isinstance(value, int):
        return np.dtype(np.int64)
    return None


def _unified(result, args: tuple):
    """``result`` cast to the type numba unifies the scalar ``args`` to (as it is, for other args)."""
    dtypes = [_numba_dtype(arg) for arg in args]
    if len(args) < 2 or any(dtype is None for dtype in dtypes):
        return result
    return np.result_type(*dtypes).type(result)


def _min(*args, **kwargs):
    return _unified(builtins.min(*args, **kwargs), args)


def _max(*args, **kwargs):
    return _unified(builtins.max(*args, **kwargs), args)


def _float_function(function):
    """``function`` of math with numba's results: NaN or inf instead of an error, float32 for float32 arguments."""

    def wrapped(*args):
        try:
            result = function(*args)
        except ValueError:
            result = math.nan
        except OverflowError:
            result = math.inf
        single = all(isinstance(arg, np.float32) for arg in args)
        return np.float32(result) if single else np.float64(result)

    wrapped.__name__ = wrapped.__qualname__ = function.__name__
    return wrapped


_MATH = types.ModuleType("math", "math with numba's results for domain errors, overflows and float32")
_MATH.__dict__.update({name: value for name, value in vars(math).items() if not name.startswith("__")})
_MATH.__dict__.update({name: _float_function(getattr(math, name)) for name in _FLOAT_FUNCTIONS})
_BUILTINS = {**vars(builtins), "min": _min, "max": _max}


class _Globals(dict):
    """The function's own overrides, then its module's globals, read live."""

    def __init__(self, module_globals: dict, overrides: dict):
        super().__init__(overrides)
        self.module_globals = module_globals

    def __missing__(self, name):
        return self.module_globals[name]


def _float64_constants(code: types.CodeType) -> types.CodeType:
    constants = tuple(
        np.float64(value)
        if type(value) is float
        else _float64_constants(value)
        if isinstance(value, types.CodeType)
        else value
        for value in code.co_consts
    )
    return code.replace(co_consts=constants)


def numba_semantics(function, helpers=None):
    """``function`` (a plain Python function) with numba's scalar typing and arithmetic errors.

    Parameters
    ----------
    function : function
        A kernel body or device function's ``py_func``.
    helpers : callable, optional
        ``helpers(name, value) -> replacement or None``: what a global the function reads
        becomes (e.g. a device function its Python source); None keeps the global.

    Returns
    -------
    function
        A new function over the same globals (read live) with the overrides of the module
        docstring; cached per function and ``helpers``.
    """
    key = (function, helpers)
    found = _cache.get(key)
    if found is not None:
        return found
    module_globals = function.__globals__
    overrides: dict = {"__builtins__": _BUILTINS}
    math_functions = {id(getattr(math, name)): name for name in _FLOAT_FUNCTIONS}
    for name in function.__code__.co_names:
        value = module_globals.get(name)
        if value is math:
            overrides[name] = _MATH
        elif id(value) in math_functions and value is getattr(math, math_functions[id(value)]):
            overrides[name] = getattr(_MATH, math_functions[id(value)])
        elif helpers is not None and value is not None:
            replacement = helpers(name, value)
            if replacement is not None:
                overrides[name] = replacement
    made = types.FunctionType(
        _float64_constants(function.__code__),
        _Globals(module_globals, overrides),
        function.__name__,
        function.__defaults__,
        function.__closure__,
    )
    made.__qualname__ = function.__qualname__
    made.__kwdefaults__ = function.__kwdefaults__
    _cache[key] = made
    return made
