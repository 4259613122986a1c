"""Per-sample shapes from sizes and gymnasium spaces (duck-typed: gymnasium is optional)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence


def sample_shape(size, keep_dimensions: bool = False) -> tuple[int, ...]:
    """Shape of one sample of a memory tensor.

    Parameters
    ----------
    size : int, tuple or list of int, or a gymnasium space
        ``Discrete`` counts as one element, ``MultiDiscrete`` as ``len(nvec)``, ``Box`` and
        ``MultiBinary`` as their shape, ``Dict`` and ``Tuple`` as the sum of their parts.
    keep_dimensions : bool
        Keep the shape as given; otherwise it is flattened to ``(number of elements,)``.

    Returns
    -------
    tuple of int
    """
    shape = _shape_of(size, keep_dimensions)
    if any(dim < 1 for dim in shape):
        raise ValueError(f"size: every dimension must be at least 1, got {shape}")
    return shape if keep_dimensions else (math.prod(shape),)


def _shape_of(size, keep_dimensions: bool) -> tuple[int, ...]:
    if isinstance(size, bool):
        raise TypeError(f"size: expected an int, a tuple of ints or a space, got the bool {size!r}")
    if isinstance(size, numbers.Integral):
        return (int(size),)
    if isinstance(size, numbers.Real) and float(size).is_integer():
        return (int(float(size)),)  # skrl accepts whole floats
    if isinstance(size, (tuple, list)):
        if not all(isinstance(dim, numbers.Integral) and not isinstance(dim, bool) for dim in size):
            raise TypeError(f"size: expected a tuple of ints, got {size!r}")
        return tuple(int(dim) for dim in size) if size else (1,)
    return _space_shape(size, keep_dimensions)


def _space_shape(space, keep_dimensions: bool) -> tuple[int, ...]:
    # Composite spaces (Dict, Tuple) hold their parts in `.spaces`.
    parts = getattr(space, "spaces", None)
    if isinstance(parts, (Mapping, Sequence)) and not isinstance(parts, str):
        if keep_dimensions:
            raise ValueError(f"size: keep_dimensions=True cannot be used with the composite space {space!r}")
        values = parts.values() if isinstance(parts, Mapping) else parts
        return (sum(math.prod(_space_shape(part, False)) for part in values),)
    nvec = getattr(space, "nvec", None)
    if nvec is not None:  # MultiDiscrete: one integer per sub-action
        return tuple(int(dim) for dim in nvec.shape)
    shape = getattr(space, "shape", None)
    if hasattr(space, "n") and shape == ():  # Discrete: one integer
        return (1,)
    if isinstance(shape, tuple) and all(isinstance(dim, numbers.Integral) for dim in shape):
        return tuple(int(dim) for dim in shape) if shape else (1,)
    raise TypeError(
        f"size: expected an int, a tuple of ints or a gymnasium space, got {type(space).__name__}: {space!r}"
    )
