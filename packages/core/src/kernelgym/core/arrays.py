"""Backend arrays and zero-copy views of them.

``cpu`` arrays are numpy arrays; ``cuda`` arrays are numba device arrays; ``sim`` arrays
are the simulator's device arrays, which wrap a host numpy buffer. torch is imported only
when a torch view is asked for.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys

import numpy as np

from kernelgym.core.backends import simulator_enabled

__all__ = [
    "SUPPORTED_DTYPES",
    "allocation",
    "check_supported_dtype",
    "to_torch",
    "to_numpy",
    "to_dlpack",
    "to_backend",
    "byte_view",
    "is_device_array",
    "is_torch_tensor",
    "is_uniform_view",
    "copy_to_backend",
]

# dtypes that every backend's kernels and torch views can take (numba and torch both lack
# float128/complex256, strings and objects; byte order must be the machine's own)
SUPPORTED_DTYPES = tuple(
    np.dtype(name)
    for name in (
        "bool",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "float32",
        "float64",
        "complex64",
        "complex128",
    )
)


def check_supported_dtype(name: str, dtype) -> None:
    """Raise a TypeError naming ``name`` unless kernels and torch can take ``dtype`` as it is."""
    dtype = np.dtype(dtype)
    if not dtype.isnative:
        raise TypeError(
            f"{name}: expected native byte order ({np.dtype(dtype.newbyteorder('=')).str}), got {dtype.str}; "
            f"convert it with array.astype(array.dtype.newbyteorder('='))"
        )
    if dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"{name}: expected one of the dtypes {[str(d) for d in SUPPORTED_DTYPES]}, got {dtype}")


class allocation:
    """Context manager: a MemoryError inside becomes one that names the array and its bytes.

    Parameters
    ----------
    name : str
        What is allocated (an argument or data name).
    shape : tuple of int
    dtype : numpy dtype
    where : str
        The backend or ``"host"``.
    """

    def __init__(self, name: str, shape, dtype, where: str = "host"):
        self.name, self.shape, self.dtype, self.where = name, tuple(shape), np.dtype(dtype), where

    def __enter__(self):
        # numpy refuses such a shape with a ValueError that names nothing ("array is too big")
        nbytes = int(np.prod(self.shape, dtype=object)) * self.dtype.itemsize
        if nbytes > np.iinfo(np.intp).max:
            raise MemoryError(
                f"{self.name}: cannot allocate {nbytes:,} bytes on {self.where} for shape {self.shape} "
                f"dtype {self.dtype}: more than an address space holds"
            )
        return self

    def __exit__(self, kind, error, traceback):
        if kind is not None and issubclass(kind, MemoryError):
            nbytes = int(np.prod(self.shape, dtype=object)) * self.dtype.itemsize
            raise MemoryError(
                f"{self.name}: cannot allocate {nbytes:,} bytes on {self.where} for shape {self.shape} "
                f"dtype {self.dtype}: {error}"
            ) from error
        return False


def is_torch_tensor(obj) -> bool:
    """Whether ``obj`` is a torch tensor (without importing torch)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def _simulator_buffer(array):
    """The host numpy buffer behind a simulator device array, or ``None``."""
    if not simulator_enabled():
        return None
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    return array._ary if isinstance(array, FakeCUDAArray) else None


def is_device_array(obj) -> bool:
    """Whether ``obj`` is a numba device array (a simulator one in simulator processes)."""
    if simulator_enabled():
        return _simulator_buffer(obj) is not None
    from numba import cuda

    return cuda.is_cuda_array(obj) and not is_torch_tensor(obj)


def to_torch(array):
    """A torch tensor that aliases a backend array (no copy).

    Parameters
    ----------
    array : numpy.ndarray, numba device array, simulator device array or torch.Tensor
        cpu: ``torch.from_numpy``; cuda: ``torch.as_tensor`` through
        ``__cuda_array_interface__``; sim: a CPU tensor over the simulator's host buffer.
        A tensor is returned as it is.

    Returns
    -------
    torch.Tensor
        Writes through the tensor change the array and the other way round.

    Raises
    ------
    ModuleNotFoundError
        torch is not installed (it comes with ``pip install "kernelgym-core[torch]"``).
    """
    torch = import_torch("to_torch")

    if isinstance(array, torch.Tensor):
        return array
    if isinstance(array, np.ndarray):
        return torch.from_numpy(array)
    buffer = _simulator_buffer(array)
    if buffer is not None:
        return torch.from_numpy(buffer)
    if hasattr(array, "__cuda_array_interface__"):
        return torch.as_tensor(array, device="cuda")
    raise TypeError(
        f"array: expected a numpy array, a numba device array or a torch tensor, got {type(array).__name__}"
    )


def import_torch(needed_by: str):
    """torch, or an error naming what needs it and the extra that installs it.

    kernelgym-core runs without torch; only torch views need it.
    """
    try:
        import torch
    except ModuleNotFoundError as error:
        raise _torch_missing(needed_by) from error
    return torch


def require_torch(needed_by: str) -> None:
    """Raise the error of `import_torch` if torch is not installed, without importing it
    (importing torch takes seconds: a view is made, and torch imported, when first asked for)."""
    if "torch" not in sys.modules and importlib.util.find_spec("torch") is None:
        raise _torch_missing(needed_by)


def _torch_missing(needed_by: str) -> ModuleNotFoundError:
    return ModuleNotFoundError(
        f'{needed_by} needs torch, which is not installed: pip install "kernelgym-core[torch]" '
        "(or work without torch views: torch_accessible=False, pull_data_from_device)",
        name="torch",
    )


def to_numpy(array) -> np.ndarray:
    """A host numpy array with the values of a backend array.

    Zero-copy for numpy arrays, simulator arrays and CPU tensors; a copy (device to host)
    for cuda arrays and CUDA tensors.
    """
    if isinstance(array, np.ndarray):
        return array
    if is_torch_tensor(array):
        return array.detach().cpu().numpy() if array.is_cuda else array.detach().numpy()
    buffer = _simulator_buffer(array)
    if buffer is not None:
        return buffer
    if hasattr(array, "copy_to_host"):
        return array.copy_to_host()
    raise TypeError(
        f"array: expected a numpy array, a numba device array or a torch tensor, got {type(array).__name__}"
    )


def to_dlpack(array):
    """Export a backend array as a DLPack capsule (zero-copy).

    cpu and sim arrays go through numpy's ``__dlpack__``; cuda arrays through torch.
    """
    if isinstance(array, np.ndarray):
        return array.__dlpack__()
    buffer = _simulator_buffer(array)
    if buffer is not None:
        return buffer.__dlpack__()
    return to_torch(array).__dlpack__()


# Arrays of the same size allocated one after another start at the same offset in a 4 KiB
# page: the same element of each then falls in the same L1 cache set and at the same 4K
# alias, and a loop that touches a dozen of them per env at one index stalls (a CartPole
# step at 1,024 envs, every per-env array 4 KiB: 0.84x of the same step at 1,000 or 1,100
# envs). So a cpu array starts on a cache line of its own in the page, the next line for
# the next array.
_CACHE_LINE = 64
_PAGE = 4096
_next_line = itertools.count()


def _staggered_empty(shape, dtype) -> np.ndarray:
    """An uninitialized C-contiguous array starting on a cache line, each new one on the
    next line of a 4 KiB page (see above)."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    offset = next(_next_line) % (_PAGE // _CACHE_LINE) * _CACHE_LINE
    raw = np.empty(nbytes + _PAGE, np.uint8)
    start = (offset - raw.ctypes.data) % _PAGE
    return raw[start : start + nbytes].view(dtype).reshape(shape)


def to_backend(host, backend: str):
    """A new backend array holding a copy of ``host`` (C-contiguous, same dtype).

    Parameters
    ----------
    host : array_like
        The values.
    backend : {"cuda", "cpu", "sim"}
        An already resolved backend name.
    """
    values = np.asarray(host)
    if backend == "cpu":
        copy = _staggered_empty(values.shape, values.dtype)
        copy[...] = values
        return copy
    from numba import cuda

    if is_uniform_view(values):
        device = cuda.device_array(values.shape, values.dtype)
        copy_to_backend(device, values)
        return device
    return cuda.to_device(np.ascontiguousarray(values))


def is_uniform_view(values: np.ndarray) -> bool:
    """Whether ``values`` is one value broadcast over its shape (every stride 0, e.g.
    ``np.broadcast_to(0.0, shape)``): it holds one element, however large its shape."""
    return values.ndim > 0 and values.size > 0 and not any(values.strides)


# a uniform view is copied to a device through a host block of at most this many bytes
_FILL_BLOCK_BYTES = 1 << 24


def copy_to_backend(device, host: np.ndarray) -> None:
    """Copy ``host`` into the existing backend array ``device`` in place (same shape).

    A uniform view (`is_uniform_view`) reaches a device block by block, so no host array
    of the device array's size is ever made.
    """
    if isinstance(device, np.ndarray):
        np.copyto(device, host)
    elif not is_uniform_view(host):
        device.copy_to_device(np.ascontiguousarray(host))
    else:
        flat = device.reshape(device.size)
        step = max(1, _FILL_BLOCK_BYTES // host.itemsize)
        block = np.full(min(step, host.size), host.flat[0], host.dtype)
        for start in range(0, host.size, step):
            stop = min(start + step, host.size)
            flat[start:stop].copy_to_device(block[: stop - start])


def byte_view(array, leading_shape: tuple, unit=np.uint8):
    """A zero-copy view of a C-contiguous backend array as ``unit`` words, shaped
    ``leading_shape + (words per leading index,)``.

    Kernels that copy rows of arrays of any dtype and any number of dims (device-side
    resets, episode logs) take these views: copying raw bytes is exact for every dtype.
    ``unit`` must divide the bytes per leading index (``np.uint64`` when they are a
    multiple of 8, which copies 8 bytes at a time; ``np.uint8`` always works).
    """
    count = int(np.prod(leading_shape, dtype=np.int64))
    row_bytes = array.nbytes // count if count else 0
    words = row_bytes // np.dtype(unit).itemsize
    if words * np.dtype(unit).itemsize != row_bytes:
        raise ValueError(f"unit: {np.dtype(unit)} does not divide the {row_bytes} bytes per row")
    return array.reshape(array.size).view(unit).reshape(*leading_shape, words)
