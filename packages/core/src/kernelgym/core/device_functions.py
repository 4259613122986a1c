"""Functions written once that run inside cpu, cuda and simulator kernels.

A device function is an ``njit(inline="always")`` dispatcher: a CPU prange loop inlines
it (or calls it, compiled on its own, with ``inline="never"``), and numba-cuda compiles its
Python source again as a CUDA device function. The CUDA
simulator, however, runs kernels as Python threads and hands them simulator arrays that
compiled code cannot take, so inside a simulator thread a device function runs its
Python source instead (with integer wrap-around, as on the device).

Arithmetic errors follow the GPU on every backend (numba's ``error_model="numpy"``,
numba-cuda's default): a float division by zero gives inf or NaN, an integer one gives
0, and nothing raises. The cpu launchers are compiled with that error model (see
`kernelgym.core.codegen`); in the simulator the Python source runs with numpy's
floating-point errors ignored, its float arguments as numpy scalars, and the ``njit``
helpers it calls compiled with the numpy error model; its float literals, ``min``, ``max``
and ``math`` are typed as numba types them, and ``math.sqrt`` of a negative is NaN there
too (`kernelgym.core.python_semantics`).
"""

from __future__ import annotations

import functools

import numpy as np
from numba.core.errors import TypingError
from numba.core.registry import CPUDispatcher
from numba.core.targetconfig import ConfigStack
from numba.extending import overload

from kernelgym.core import copy_data_flow, inline_copy, live_map, ssa_rewrite
from kernelgym.core.backends import in_simulator_thread, simulator_enabled
from kernelgym.core.python_semantics import numba_semantics

__all__ = ["DeviceFunction", "device_function", "atomic_add", "register_cuda_overloads", "ATOMIC_ADD_DTYPES"]

# The array dtypes numba.cuda.atomic.add compiles for (numba-cuda's typing template in
# numba/cuda/cudadecl.py, `all_numba_types`); the GPU has no atomic add for the others.
ATOMIC_ADD_DTYPES = ("int32", "int64", "uint32", "uint64", "float32", "float64")

# inlining a device function at each call site copies its IR: one scope per copy, not per block
inline_copy.install()
# numba's copy propagation (serial twin and thread team builds) without a deep copy per sweep
copy_data_flow.install()
# numba's liveness on bit sets, and its SSA reconstruction only in the blocks naming each variable
live_map.install()
ssa_rewrite.install()


class DeviceFunction(CPUDispatcher):
    """An ``njit(inline="always")`` dispatcher that runs as Python in simulator threads."""

    def _call_in_simulator_threads(self, *args, **kwargs):
        if in_simulator_thread():
            # Machine integers wrap around silently on the cpu and the device, and a float
            # division by zero gives inf/NaN: numpy scalars would warn instead. A Python
            # float (a constant bound into the launcher) becomes a float64, as numba types
            # it, so that dividing it by zero gives inf rather than ZeroDivisionError.
            args = tuple(np.float64(arg) if type(arg) is float else arg for arg in args)
            # numba's typing of float literals, min/max and math, and NaN for math's domain errors
            function = numba_semantics(self.py_func)
            with np.errstate(all="ignore"), ConfigStack().enter(_numpy_error_model_flags()):
                return function(*args, **kwargs)
        return CPUDispatcher.__call__(self, *args, **kwargs)

    # Numba reads NUMBA_ENABLE_CUDASIM once, at its import: without the simulator no thread is
    # a simulator thread, and a call from Python (a reference calls helpers hundreds of
    # thousands of times in the kit's long horizon) goes straight to the compiled dispatcher
    if simulator_enabled():
        __call__ = _call_in_simulator_threads


@functools.cache
def _numpy_error_model_flags():
    """A top-level ``njit``'s compiler flags with ``error_model="numpy"``.

    In a simulator thread the scalar ``numba.njit`` helpers a device function calls run
    compiled, each compiled on its own: with these flags on Numba's (thread-local)
    config stack they inherit the numpy error model, as they do when a launcher
    inlines them. A helper already compiled for the same argument types, by a direct
    call from Python, keeps its own error model.
    """
    from numba.core.compiler import Flags
    from numba.core.cpu import CPUTargetOptions

    return CPUTargetOptions.parse_as_flags(Flags(), {"error_model": "numpy"})


INLINE_CHOICES = ("always", "never")


def device_function(fn=None, *, inline: str = "always"):
    """Make ``fn`` callable from cpu, cuda and simulator kernels (one source).

    Use it for helpers that take arrays; helpers that take and return only scalars can
    stay plain ``numba.njit`` functions. ``@device_function`` and
    ``@device_function(inline="never")`` both work.

    Parameters
    ----------
    fn : function
        A function in the Numba subset.
    inline : {"always", "never"}
        ``"always"`` (default): Numba inlines the helper's IR into every caller, as if its
        code were written there. ``"never"``: the helper is compiled once per argument
        types as a function of its own, which its callers call (LLVM, or NVVM on cuda, may
        still inline it into the machine code). Numba's IR inlining copies a helper's whole
        IR, with the helpers it inlines in turn, at every call site and in every launcher
        that reaches it, so a large helper called from several places, or reached from
        several launchers, compiles much faster with ``"never"`` (MinAtar Seaquest's step
        launcher: 236 s to 30 s on 2 busy cores). The price is speed: each call passes
        every array argument and ends the caller's optimizations at the call (MinAtar
        Asterix's cpu env-steps/s halve with its three helpers ``"never"``), so keep it for
        helpers whose compile time hurts. The results are the same bits: the helper
        keeps the numpy error model, and its integer and float operations are the same; only
        a fast-math launcher's ``contract`` flag does not reach into it on the cpu (the
        helper keeps the default, no contraction).

    Returns
    -------
    DeviceFunction
        An ``njit(inline=inline, error_model="numpy")`` dispatcher (a ``numba``
        ``CPUDispatcher``): a division by zero gives inf/NaN, as on the GPU. Without
        ``fn``, a decorator that makes one.
    """
    if inline not in INLINE_CHOICES:
        raise ValueError(f"device_function inline: expected one of {INLINE_CHOICES}, got {inline!r}")
    if fn is None:
        return functools.partial(device_function, inline=inline)
    if not callable(fn):
        raise TypeError(f"device_function fn: expected a function, got {type(fn).__name__} {fn!r}")
    return DeviceFunction(fn, targetoptions={"nopython": True, "inline": inline, "error_model": "numpy"})


def atomic_add_dtype_error(dtype) -> str | None:
    """Why ``atomic_add`` refuses an array of ``dtype`` (a numpy or numba dtype), or None.

    Every backend refuses what the GPU's atomic add cannot do, so that a kernel that
    runs on cpu or sim also compiles for the GPU.
    """
    name = str(dtype)
    if name in ATOMIC_ADD_DTYPES:
        return None
    return (
        f"atomic_add array: dtype {name} has no atomic add on the GPU; supported dtypes: {', '.join(ATOMIC_ADD_DTYPES)}"
    )


def atomic_add(array, index, value):
    """Add ``value`` to ``array[index]`` and return the old value, atomically on the device.

    On ``cuda`` this is ``numba.cuda.atomic.add``; in the simulator it is the simulator's
    locked add; on ``cpu`` it is a plain add, which is safe because the cpu build runs the
    agents of one env one after another in the same thread (values shared *across* envs
    are not protected on the cpu).

    ``array`` must hold one of `ATOMIC_ADD_DTYPES` (what the GPU can add atomically):
    any other dtype is refused on every backend, when the kernel is compiled (cpu: a
    numba ``TypingError``; cuda: numba-cuda's) or called (simulator: ``TypeError``).
    """
    message = atomic_add_dtype_error(array.dtype)
    if message is not None:
        raise TypeError(message)
    if in_simulator_thread():
        from numba.cuda.simulator.kernelapi import FakeCUDAAtomic

        return FakeCUDAAtomic().add(array, index, value)
    old = array[index]
    array[index] = old + value
    return old


def _typed_array_error(array) -> str | None:
    """`atomic_add_dtype_error` for a numba argument type (or why it is no array)."""
    from numba.core import types

    if not isinstance(array, types.Array):
        return f"atomic_add array: expected an array, got {array}"
    return atomic_add_dtype_error(array.dtype)


@overload(atomic_add, target="cpu", inline="always")
def _atomic_add_cpu(array, index, value):
    message = _typed_array_error(array)
    if message is not None:
        raise TypingError(message)

    def plain_add(array, index, value):
        old = array[index]
        array[index] += value
        return old

    return plain_add


_cuda_overloads_registered = False


def register_cuda_overloads() -> None:
    """Register the CUDA implementations of the portable intrinsics (once per process).

    Called before the first real CUDA launch, so that importing kernelgym.core does not
    import numba-cuda's compiler.
    """
    global _cuda_overloads_registered
    if _cuda_overloads_registered or simulator_enabled():
        return
    from numba import cuda
    from numba.cuda.extending import overload as cuda_overload

    from kernelgym.core import contraction

    contraction.install()  # launchers compile with -fma=0: the same bits as the cpu twin

    @cuda_overload(atomic_add, target="cuda", inline="always")
    def _atomic_add_cuda(array, index, value):
        message = _typed_array_error(array)
        if message is not None:
            raise TypingError(message)

        def device_add(array, index, value):
            return cuda.atomic.add(array, index, value)

        return device_add

    _cuda_overloads_registered = True
