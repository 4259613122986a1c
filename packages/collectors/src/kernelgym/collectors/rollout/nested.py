"""Apply functions to nested containers (dicts, lists, tuples, namedtuples) of data.

The rollout engines keep everything (observations, actions, the actor's recurrent
state) as nested containers of arrays or tensors, so that an env with a ``Dict``
observation space or an LSTM actor with ``hx = (h, c)`` need no special code.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import getitem as _getitem
from typing import Any

__all__ = ["suply", "tuply", "setitem", "getitem", "leaves"]


def _is_namedtuple(obj: Any) -> bool:
    return isinstance(obj, tuple) and hasattr(obj, "_fields")


def suply(fn: Callable, struct: Any, *rest: Any, **kwargs: Any) -> Any:
    """Apply ``fn`` to the leaves of nested containers of IDENTICAL structure.

    Parameters
    ----------
    fn : callable
        Called as ``fn(leaf, *other_leaves, **kwargs)`` for every leaf.
    struct, *rest : nested containers
        Dicts, lists, tuples and namedtuples, the leaves are anything else.

    Returns
    -------
    A new container of the same structure as ``struct`` holding ``fn``'s results.
    """
    if isinstance(struct, dict):
        return {k: suply(fn, v, *(r[k] for r in rest), **kwargs) for k, v in struct.items()}
    if isinstance(struct, list):
        return [suply(fn, *items, **kwargs) for items in zip(struct, *rest, strict=True)]
    if _is_namedtuple(struct):
        return type(struct)(*(suply(fn, *items, **kwargs) for items in zip(struct, *rest, strict=True)))
    if isinstance(struct, tuple):
        return tuple(suply(fn, *items, **kwargs) for items in zip(struct, *rest, strict=True))
    return fn(struct, *rest, **kwargs)


def tuply(fn: Callable, *structs: Any, **kwargs: Any) -> Any:
    """Apply ``fn`` to the tuple of corresponding leaves of several containers.

    ``tuply(torch.stack, a, b, c)`` stacks matching leaves of ``a``, ``b`` and ``c``
    (``fn`` receives one tuple, unlike `suply`, which unpacks it).
    """
    return suply(lambda *leaves: fn(leaves, **kwargs), *structs)


def setitem(dst: Any, src: Any, *, index: Any) -> None:
    """Write ``src`` into ``dst[index]`` leaf by leaf (in place)."""
    if isinstance(dst, dict):
        for k, v in dst.items():
            setitem(v, src[k], index=index)
    elif isinstance(dst, (list, tuple)):
        for d, s in zip(dst, src, strict=True):
            setitem(d, s, index=index)
    else:
        dst[index] = src


def getitem(struct: Any, *, index: Any) -> Any:
    """Index every leaf: ``suply(getitem, x, index=i)`` is ``x[i]`` leaf by leaf."""
    return suply(lambda leaf: _getitem(leaf, index), struct)


def leaves(struct: Any) -> list:
    """The leaves of a nested container, depth first (``[]`` for ``()``)."""
    found: list = []
    suply(found.append, struct)
    return found
