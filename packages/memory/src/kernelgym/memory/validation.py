"""Argument checks shared by the memories and their files."""

from __future__ import annotations

import numbers


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
