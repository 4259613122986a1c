"""Torch and numpy views of the same memory: shared between processes or pinned.

The rollout engines write into buffers from numpy (fast per-env item writes) and
hand them to the actor as torch tensors (batched forward passes) without copies:
an `Aliased` pair views one storage both ways.
"""

from __future__ import annotations

from ctypes import c_byte
from typing import Any, NamedTuple

import numpy
import torch

from .nested import suply

__all__ = ["Aliased", "aliased", "torchify", "numpify"]


def _check_leading(leading: tuple) -> bool:
    """Validate the extra leading dims; True when they only broadcast (all ones)."""
    for dim in leading:
        if not isinstance(dim, int) or isinstance(dim, bool) or dim < 0:
            raise TypeError(f"leading dims must be non-negative ints, got {leading!r}")
    return all(dim == 1 for dim in leading)


def torchify(obj: Any, *leading: int, copy: bool = False, pinned: bool = False, shared: bool = False) -> Any:
    """Convert the leaves of a nested container into CPU torch tensors.

    Parameters
    ----------
    obj : nested container of numpy arrays, tensors or scalars.
    *leading : int
        Extra leading dims to prepend. Non-unit dims allocate (and broadcast the data).
    copy : bool
        Always copy, even when numpy data could be aliased.
    pinned : bool
        Allocate in page-locked memory (faster host-to-GPU copies; needs CUDA).
    shared : bool
        Allocate in torch's inter-process shared memory.

    Returns
    -------
    The container with torch tensors; numpy inputs are aliased unless a copy was
    needed (non-broadcasting ``leading``, ``copy``, ``pinned`` or ``shared``).
    """
    if pinned and shared:
        raise ValueError("torchify: `pinned` and `shared` are mutually exclusive, got both True")
    is_broadcast = _check_leading(leading)

    def _as_tensor(x):
        pyt = torch.as_tensor(x)
        if pyt.device.type != "cpu":
            raise ValueError(f"torchify: expected host data, got a tensor on {pyt.device}")
        if not copy and not (pinned or shared) and is_broadcast:
            return pyt.reshape(leading + pyt.shape) if leading else pyt
        out = torch.empty(leading + pyt.shape, dtype=pyt.dtype, pin_memory=pinned)
        out.copy_(pyt)
        if shared:
            out.share_memory_()
        return out

    return suply(_as_tensor, obj)


def numpify(obj: Any, *leading: int, copy: bool = False, ctx: Any = None) -> Any:
    """Convert the leaves of a nested container into numpy arrays.

    Tensors are aliased (zero copy) unless ``copy``, non-broadcasting ``leading``
    dims, or ``ctx`` (a multiprocessing context: allocate in its shared memory) ask
    for new memory.
    """
    is_broadcast = _check_leading(leading)

    def _as_array(x):
        npy = numpy.asarray(x)
        if not copy and ctx is None and is_broadcast:
            return npy.reshape(leading + npy.shape) if leading else npy
        shape = leading + npy.shape
        n_bytes = int(numpy.prod(shape, dtype=numpy.int64)) * npy.itemsize
        buffer = ctx.RawArray(c_byte, n_bytes) if ctx is not None else None
        out = numpy.ndarray(shape, dtype=npy.dtype, buffer=buffer)
        numpy.copyto(out, npy, casting="no")
        return out

    return suply(_as_array, obj)


class Aliased(NamedTuple):
    """The same data as numpy arrays (``npy``) and torch tensors (``pyt``)."""

    npy: Any
    pyt: Any


def aliased(obj: Any, *, copy: bool = False, pinned: bool = False, shared: bool = False) -> Aliased:
    """Torchify ``obj`` (see `torchify`) and alias the tensors with numpy arrays.

    Allocation (``copy``, ``pinned``, ``shared``) happens BEFORE the numpy views are
    taken, so the two views never go out of sync.
    """
    pyt = torchify(obj, copy=copy, pinned=pinned, shared=shared)
    return Aliased(numpify(pyt), pyt)
