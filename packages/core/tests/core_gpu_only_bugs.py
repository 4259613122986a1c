"""Kernels that run on the cpu backend and in the CUDA simulator but do not build for a GPU.

``running_mean_with_scratch`` allocates a scratch array inside the kernel: Numba's cpu
target allocates it on the heap, the simulator runs numpy, but a CUDA kernel cannot call
``np.zeros`` (numba-cuda has no allocator in kernels unless its NRT is switched on), so
NVVM never gets the kernel. A common first-kernel mistake that only a GPU compile shows.
"""

import numpy as np

from kernelgym.core import env_kernel


@env_kernel
def running_mean_with_scratch(i, x, out):
    scratch = np.zeros(2)
    scratch[0] = x[i]
    scratch[1] = x[i] + 1.0
    out[i] = (scratch[0] + scratch[1]) / 2.0


@env_kernel
def running_mean(i, x, out):
    out[i] = (x[i] + x[i] + 1.0) / 2.0


@env_kernel
def halve_in_float32(i, x):
    x[i] = x[i] * np.float32(0.5)
