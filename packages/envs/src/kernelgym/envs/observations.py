"""Structured observation spaces: ``Dict`` and ``Tuple`` of ``Box``, ``Discrete`` and ``MultiBinary`` leaves.

The runtime allocates one buffer per leaf, and a kernel binds each leaf by a name
derived from its key path (`leaf_name`): ``obs_`` followed by the keys joined by
``_``, a ``Tuple`` item by its index::

    Dict(image=Box(0, 255, (3, 7, 7), uint8), vector=Box(-1, 1, (4,)))  ->  obs_image, obs_vector
    Dict(sensors=Dict(lidar=Box(...)))                                  ->  obs_sensors_lidar
    Tuple((Box(...), Discrete(3)))                                      ->  obs_0, obs_1

A flat ``Box`` observation keeps the one buffer ``obs``. Two paths that give the same
name, or a key that makes no Python identifier, are refused when the spec is made.
Host-side values of a structured space are nested ``dict``/``tuple`` trees of arrays,
as gymnasium's; `leaf_arrays` and `build_tree` convert between a tree and the leaves
by name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from gymnasium import spaces

__all__ = [
    "LEAF_SPACES",
    "Leaf",
    "build_tree",
    "check_observation_space",
    "is_structured",
    "leaf_arrays",
    "leaf_name",
    "leaves",
    "map_tree",
    "space_shape",
]

# The spaces a leaf may be, and the prefix of every leaf's kernel name.
LEAF_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiBinary)
PREFIX = "obs"
# the fix a refusal of a space suggests
FLATTEN = "flatten it into a Box (gymnasium.spaces.flatten_space)"


class Leaf(NamedTuple):
    """One array of a structured observation: where it sits, its kernel name, its space."""

    path: tuple
    name: str
    space: spaces.Space

    @property
    def shape(self) -> tuple[int, ...]:
        """One env's (one agent's) shape of the leaf."""
        return space_shape(self.space)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.space.dtype)


def space_shape(space: spaces.Space) -> tuple[int, ...]:
    """The shape of an array space (Box, Discrete, MultiDiscrete, MultiBinary); gymnasium types it optional."""
    if space.shape is None:
        raise TypeError(f"space: expected a space with a shape (Box, Discrete, ...), got {space}")
    return tuple(space.shape)


def is_structured(space) -> bool:
    """Whether ``space`` is a ``Dict`` or ``Tuple`` (several leaf buffers) rather than one array."""
    return isinstance(space, (spaces.Dict, spaces.Tuple))


def leaf_name(path) -> str:
    """The kernel name of the leaf at key path ``path``: ``obs_<key>_<key>...`` (``obs`` for ``()``)."""
    return "_".join((PREFIX, *(str(key) for key in path)))


def leaves(space) -> tuple[Leaf, ...]:
    """Every leaf of ``space`` in gymnasium's order (a ``Dict``'s keys as it holds them), depth first."""
    found = []

    def walk(node, path):
        if isinstance(node, spaces.Dict):
            for key, child in node.spaces.items():
                walk(child, (*path, key))
        elif isinstance(node, spaces.Tuple):
            for index, child in enumerate(node.spaces):
                walk(child, (*path, index))
        else:
            found.append(Leaf(path, leaf_name(path), node))

    walk(space, ())
    return tuple(found)


def check_observation_space(where: str, space) -> tuple[Leaf, ...]:
    """Check a ``Box``, ``Dict`` or ``Tuple`` observation space and return its leaves.

    Raises
    ------
    TypeError
        A space or leaf of another kind, or a leaf dtype the runtime cannot store.
    ValueError
        An empty ``Dict``/``Tuple``, a key path whose name is no Python identifier, or
        two paths with the same name.
    """
    if isinstance(space, spaces.Box):
        return (Leaf((), PREFIX, space),)
    if not is_structured(space):
        raise TypeError(f"{where} observation_space: expected a Box, Dict or Tuple, got {space}; {FLATTEN}")
    found = leaves(space)
    for leaf in found:
        label = f"{where} observation_space[{_show_path(leaf.path)}]"
        if not isinstance(leaf.space, LEAF_SPACES):
            raise TypeError(
                f"{label}: expected a Box, Discrete, MultiBinary, Dict or Tuple, got {leaf.space}; {FLATTEN}"
            )
        if leaf.dtype.kind not in "biuf":
            raise TypeError(f"{label}: expected a bool, integer or float dtype, got {leaf.dtype}")
        if not leaf.name.isidentifier():
            raise ValueError(
                f"{label}: the kernel name {leaf.name!r} derived from this key path is not a "
                f"Python identifier; use keys made of letters, digits and '_'"
            )
    if not found or any(_empty(node) for node in _nodes(space)):
        raise ValueError(
            f"{where} observation_space: expected every Dict and Tuple to hold at least one space, got {space}"
        )
    by_name: dict[str, tuple] = {}
    for leaf in found:
        if leaf.name in by_name:
            raise ValueError(
                f"{where} observation_space: the key paths [{_show_path(by_name[leaf.name])}] and "
                f"[{_show_path(leaf.path)}] both give the kernel name {leaf.name!r}; rename a key"
            )
        by_name[leaf.name] = leaf.path
    return found


def leaf_arrays(space, obs) -> dict[str, Any]:
    """The leaves of a host or device observation tree by kernel name (a Box: ``{"obs": obs}``)."""
    if not is_structured(space):
        return {PREFIX: obs}
    result = {}
    for leaf in leaves(space):
        node = obs
        for key in leaf.path:
            node = node[key]
        result[leaf.name] = node
    return result


def build_tree(space, arrays: dict[str, Any]):
    """The observation tree of ``space`` holding ``arrays`` (leaves by kernel name); a Box: ``arrays["obs"]``."""
    return _build(space, (), arrays)


def map_tree(function: Callable, tree):
    """``tree`` with ``function`` applied to each leaf array (dicts and tuples rebuilt)."""
    if isinstance(tree, dict):
        return {key: map_tree(function, value) for key, value in tree.items()}
    if isinstance(tree, tuple):
        return tuple(map_tree(function, value) for value in tree)
    return function(tree)


def _build(space, path, arrays):
    if isinstance(space, spaces.Dict):
        return {key: _build(child, (*path, key), arrays) for key, child in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(_build(child, (*path, index), arrays) for index, child in enumerate(space.spaces))
    return arrays[leaf_name(path)]


def _nodes(space):
    yield space
    children = (
        space.spaces.values()
        if isinstance(space, spaces.Dict)
        else space.spaces
        if isinstance(space, spaces.Tuple)
        else ()
    )
    for child in children:
        yield from _nodes(child)


def _empty(node) -> bool:
    return is_structured(node) and len(node.spaces) == 0


def _show_path(path) -> str:
    return ", ".join(repr(key) for key in path)
