"""What every memory file carries besides its arrays: sizes, a table of arrays, and SHA-256 digests.

The metadata is one JSON object. Each array entry holds its dtype, shape and the SHA-256
of the array's bytes as stored in the file (little-endian, row-major; csv files store
the written cells only). ``metadata_sha256`` is the digest of the rest of the metadata
(canonical JSON), so a changed byte anywhere is caught, and the reader names what changed.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field

import torch

from .validation import check_tensor_name

FILE_KIND = "kernelgym-memory"
#: version 2 added the digests; files of version 1 are refused (they cannot be verified)
FILE_VERSION = 2


@dataclass
class Snapshot:
    """Everything a memory file holds; tensors are CPU tensors of shape (memory_size, num_envs, ...)."""

    memory_size: int
    num_envs: int
    position: int
    filled: bool
    tensors: dict[str, torch.Tensor]
    keep_dimensions: dict[str, bool]
    #: per-cell state of a memory subclass, each of shape (memory_size * num_envs, ...)
    extra: dict[str, torch.Tensor] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return self.memory_size * self.num_envs if self.filled else self.position


class SizeMismatch(ValueError):
    """The file holds a memory of another size than the one that loads it."""


def check(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


def array_digest(tensor: torch.Tensor, cells: int) -> str:
    """SHA-256 of the first ``cells`` cells (first dimension) of ``tensor``, as raw bytes."""
    flat = tensor.reshape(tensor.shape[0], -1)[:cells].contiguous()
    return hashlib.sha256(flat.view(torch.uint8).numpy()).hexdigest()


def _canonical(meta: dict) -> bytes:
    return json.dumps(meta, sort_keys=True, separators=(",", ":")).encode()


def describe(snapshot: Snapshot, stored_cells: int) -> str:
    """The metadata text of ``snapshot`` whose arrays keep their first ``stored_cells`` cells."""

    def entry(tensor: torch.Tensor, flat: torch.Tensor) -> dict:
        return {
            "dtype": str(tensor.dtype).removeprefix("torch."),
            "shape": list(tensor.shape),
            "sha256": array_digest(flat, stored_cells),
        }

    capacity = snapshot.memory_size * snapshot.num_envs
    meta = {
        "kind": FILE_KIND,
        "version": FILE_VERSION,
        "memory_size": snapshot.memory_size,
        "num_envs": snapshot.num_envs,
        "position": snapshot.position,
        "filled": snapshot.filled,
        "tensors": {
            name: {**entry(tensor, tensor.reshape(capacity, -1)), "keep_dimensions": snapshot.keep_dimensions[name]}
            for name, tensor in snapshot.tensors.items()
        },
        "extra": {name: entry(tensor, tensor) for name, tensor in snapshot.extra.items()},
    }
    meta["metadata_sha256"] = hashlib.sha256(_canonical(meta)).hexdigest()
    return json.dumps(meta)


@dataclass
class Layout:
    """Validated metadata: what the arrays must look like."""

    memory_size: int
    num_envs: int
    position: int
    filled: bool
    tensors: dict[str, tuple[torch.dtype, tuple[int, ...]]]
    keep_dimensions: dict[str, bool]
    extra: dict[str, tuple[torch.dtype, tuple[int, ...]]]
    digests: dict[tuple[str, str], str]  # ("tensor" or "extra", name) -> sha256

    @property
    def capacity(self) -> int:
        return self.memory_size * self.num_envs

    @property
    def count(self) -> int:
        return self.capacity if self.filled else self.position

    def arrays(self):
        """``(group, name, dtype, shape)`` of every array, tensors first."""
        for group, table in (("tensor", self.tensors), ("extra", self.extra)):
            for name, (dtype, shape) in table.items():
                yield group, name, dtype, shape

    def nbytes(self) -> int:
        """Bytes of every array at full size."""
        return sum(math.prod(shape) * dtype.itemsize for _, _, dtype, shape in self.arrays())

    def cell_width(self) -> int:
        """Elements per cell, over every array (the columns of a csv file)."""
        return sum(math.prod(shape) // self.capacity for _, _, _, shape in self.arrays())


def _parse_dtype(name) -> torch.dtype:
    dtype = getattr(torch, name, None) if isinstance(name, str) else None
    check(isinstance(dtype, torch.dtype), f"unknown dtype {name!r}")
    return dtype


def parse(text: str, memory_size: int | None = None, num_envs: int | None = None) -> Layout:
    """Validate metadata text; sizes other than ``memory_size``/``num_envs`` raise `SizeMismatch`.

    Only small integers are read here: nothing is allocated from the sizes the file claims.
    """
    meta = json.loads(text)
    check(isinstance(meta, dict) and meta.get("kind") == FILE_KIND, "not a kernelgym memory file")
    check(
        meta.get("version") == FILE_VERSION,
        f"unsupported file version {meta.get('version')!r} (this kernelgym-memory reads version {FILE_VERSION})",
    )
    sizes = {key: meta.get(key) for key in ("memory_size", "num_envs", "position")}
    check(all(type(value) is int for value in sizes.values()), f"bad sizes {sizes}")
    file_size, file_envs, position = sizes.values()
    check(file_size >= 1 and file_envs >= 1, f"bad sizes {sizes}")
    if memory_size is not None and (file_size, file_envs) != (memory_size, num_envs):
        raise SizeMismatch(
            f"path: file holds memory_size={file_size}, num_envs={file_envs}; "
            f"this memory has memory_size={memory_size}, num_envs={num_envs}"
        )
    check(0 <= position < file_size * file_envs, f"bad position {position}")
    check(type(meta.get("filled")) is bool, f"bad filled flag {meta.get('filled')!r}")
    digests = {}

    def arrays(group: str, entries, leading: tuple[int, ...]) -> dict:
        check(isinstance(entries, dict), f"bad {group} table")
        out = {}
        for name, entry in entries.items():
            try:
                check_tensor_name(name, f"{group} name")
            except ValueError as error:
                raise ValueError(f"{error} (tensor names in a file follow create_tensor's rule)") from None
            check(isinstance(entry, dict), f"bad entry for {name!r}")
            shape = entry.get("shape")
            check(
                isinstance(shape, list) and all(type(dim) is int and dim >= 1 for dim in shape),
                f"bad shape for {name!r}",
            )
            check(tuple(shape[: len(leading)]) == leading, f"shape of {name!r} does not start with {leading}")
            digest = entry.get("sha256")
            check(isinstance(digest, str) and len(digest) == 64, f"no sha256 digest for {name!r}")
            digests[group, name] = digest
            out[name] = (_parse_dtype(entry.get("dtype")), tuple(shape))
        return out

    tensors = arrays("tensor", meta.get("tensors"), (file_size, file_envs))
    keep = {name: meta["tensors"][name].get("keep_dimensions") for name in tensors}
    check(all(type(flag) is bool for flag in keep.values()), "bad keep_dimensions flags")
    extra = arrays("extra", meta.get("extra", {}), (file_size * file_envs,))
    stored = meta.pop("metadata_sha256", None)
    check(stored == hashlib.sha256(_canonical(meta)).hexdigest(), "the metadata does not match its sha256 digest")
    return Layout(file_size, file_envs, position, meta["filled"], tensors, keep, extra, digests)


def verified(layout: Layout, tensors: dict, extra: dict, stored_cells: int) -> Snapshot:
    """A `Snapshot` of arrays checked against ``layout`` and its digests."""
    tables = {"tensor": tensors, "extra": extra}
    for group, expected in (("tensor", layout.tensors), ("extra", layout.extra)):
        table = tables[group]
        check(set(table) == set(expected), f"arrays {sorted(table)} do not match the metadata {sorted(expected)}")
        for name, tensor in table.items():
            dtype, shape = expected[name]
            check(isinstance(tensor, torch.Tensor), f"{name!r} is not a tensor")
            check(
                tensor.dtype == dtype and tuple(tensor.shape) == shape,
                f"{name!r} is {tensor.dtype} {tuple(tensor.shape)}, metadata says {dtype} {shape}",
            )
            check(
                array_digest(tensor.reshape(layout.capacity, -1), stored_cells) == layout.digests[group, name],
                f"{name!r} does not match its sha256 digest: the file is corrupted",
            )
    return Snapshot(
        layout.memory_size, layout.num_envs, layout.position, layout.filled, tensors, layout.keep_dimensions, extra
    )
