"""Argument checks shared by the memories and their files."""

from __future__ import annotations

import numbers

import numpy as np
import torch


def check_int(value, argument: str, minimum: int = 1) -> int:
    """``value`` as an int ``>= minimum``; TypeError or ValueError naming ``argument`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{argument}: expected an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{argument}: expected an int >= {minimum}, got {value}")
    return int(value)


def check_tensor_name(name, argument: str = "name") -> str:
    """A tensor name: a Python identifier not starting with ``"__"`` (reserved for file metadata)."""
    if not isinstance(name, str) or not name.isidentifier() or name.startswith("__"):
        raise ValueError(f"{argument}: expected a Python identifier not starting with '__', got {name!r}")
    return name


def _brief(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _check_no_bools(values, argument: str, expected: str) -> None:
    """Refuse a Python sequence holding a bool: torch and numpy would read it as 0 or 1."""
    if isinstance(values, (list, tuple)):
        try:
            items = np.asarray(values, dtype=object).reshape(-1).tolist()
        except ValueError:  # ragged: the conversion below says so, naming the argument
            return
        if any(isinstance(item, (bool, np.bool_)) for item in items):
            raise TypeError(f"{argument}: expected {expected}, got a bool in {_brief(values)}")


def as_index_tensor(indexes, argument: str, device) -> torch.Tensor:
    """``indexes`` as a 1-d integer tensor on ``device``; TypeError or ValueError naming ``argument``."""
    _check_no_bools(indexes, argument, "integer indexes")
    try:
        tensor = torch.as_tensor(indexes, device=device)
    except (TypeError, ValueError, RuntimeError, OverflowError) as error:
        # e.g. an int beyond 64 bits: torch says "Overflow when unpacking long long"
        raise ValueError(
            f"{argument}: expected a 1-d sequence of int64 values, got {_brief(indexes)} ({error})"
        ) from None
    if isinstance(indexes, (list, tuple)) and tensor.numel() == 0 and tensor.dim() == 1:
        tensor = tensor.long()  # an empty list reads as float32: it is no index at all
    if tensor.dtype.is_floating_point or tensor.dtype.is_complex or tensor.dtype == torch.bool or tensor.dim() != 1:
        raise TypeError(
            f"{argument}: expected a 1-d integer sequence, got {tensor.dtype} of shape {tuple(tensor.shape)}"
        )
    return tensor


def as_real_tensor(values, argument: str, device, dtype: torch.dtype) -> torch.Tensor:
    """Real ``values`` as a ``dtype`` tensor on ``device``, with Python numbers read in ``dtype``.

    ``torch.as_tensor`` reads a Python list of floats in the default dtype (float32), where
    a finite 1e39 becomes inf; a list is read here in ``dtype`` instead, and a number beyond
    its range is refused as overflowing it. Tensors and arrays keep their dtype until checked.
    """
    if not isinstance(values, (torch.Tensor, np.ndarray)):
        _check_no_bools(values, argument, "real numbers")
        try:
            array = np.asarray(values)
        except (TypeError, ValueError, OverflowError) as error:
            raise TypeError(f"{argument}: expected real numbers, got {_brief(values)} ({error})") from None
        if array.dtype == object:  # Python ints beyond 64 bits (or not numbers at all)
            items = array.reshape(-1).tolist()
            if not all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in items):
                raise TypeError(f"{argument}: expected real numbers, got {_brief(values)}")
            info = torch.finfo(dtype)
            for v in items:
                if not info.min <= v <= info.max:
                    raise ValueError(f"{argument}: {_brief(v)} overflows {str(dtype).removeprefix('torch.')}")
            array = np.asarray(items, dtype=np.float64).reshape(array.shape)
        if array.dtype.kind not in "biuf":
            raise TypeError(f"{argument}: expected real numbers, got {_brief(values)} (numpy dtype {array.dtype})")
        if array.dtype.kind == "f" and array.size:
            finite = array[np.isfinite(array)]
            largest = float(np.abs(finite).max()) if finite.size else 0.0
            if largest > torch.finfo(dtype).max:
                raise ValueError(f"{argument}: {largest:.6g} overflows {str(dtype).removeprefix('torch.')}")
        values = array
    tensor = torch.as_tensor(values, device=device)
    if tensor.dtype.is_complex or tensor.dtype == torch.bool:
        raise TypeError(f"{argument}: expected real numbers, got {tensor.dtype}")
    return tensor
