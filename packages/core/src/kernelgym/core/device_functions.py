"""Functions written once that run inside cpu, cuda and simulator kernels.

A device function is an ``njit(inline="always")`` dispatcher: a CPU prange loop inlines
it, and numba-cuda compiles its Python source again as a CUDA device function. The CUDA
simulator, however, runs kernels as Python threads and hands them simulator arrays that
compiled code cannot take, so inside a simulator thread a device function runs its
Python source instead (with integer wrap-around, as on the device).
"""

from __future__ import annotations

import numpy as np
from numba.core.registry import CPUDispatcher
from numba.extending import overload

from kernelgym.core.backends import in_simulator_thread, simulator_enabled

__all__ = ["DeviceFunction", "device_function", "atomic_add", "register_cuda_overloads"]


class DeviceFunction(CPUDispatcher):
    """An ``njit(inline="always")`` dispatcher that runs as Python in simulator threads."""

    def __call__(self, *args, **kwargs):
        if in_simulator_thread():
            # Machine integers wrap around silently on the cpu and the device; numpy
            # scalars would warn instead.
            with np.errstate(over="ignore"):
                return self.py_func(*args, **kwargs)
        return super().__call__(*args, **kwargs)


def device_function(fn):
    """Make ``fn`` callable from cpu, cuda and simulator kernels (one source).

    Use it for helpers that take arrays; helpers that take and return only scalars can
    stay plain ``numba.njit`` functions.

    Parameters
    ----------
    fn : function
        A function in the Numba subset.

    Returns
    -------
    DeviceFunction
        An ``njit(inline="always")`` dispatcher (a ``numba`` ``CPUDispatcher``).
    """
    return DeviceFunction(fn, targetoptions={"nopython": True, "inline": "always"})


def atomic_add(array, index, value):
    """Add ``value`` to ``array[index]`` and return the old value, atomically on the device.

    On ``cuda`` this is ``numba.cuda.atomic.add``; in the simulator it is the simulator's
    locked add; on ``cpu`` it is a plain add, which is safe because the cpu build runs the
    agents of one env one after another in the same thread (values shared *across* envs
    are not protected on the cpu).
    """
    if in_simulator_thread():
        from numba.cuda.simulator.kernelapi import FakeCUDAAtomic

        return FakeCUDAAtomic().add(array, index, value)
    old = array[index]
    array[index] = old + value
    return old


@overload(atomic_add, target="cpu", inline="always")
def _atomic_add_cpu(array, index, value):
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
        def device_add(array, index, value):
            return cuda.atomic.add(array, index, value)

        return device_add

    _cuda_overloads_registered = True
