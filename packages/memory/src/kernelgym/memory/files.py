"""Memory files in three formats (pt, npz, csv) that load without running any code.

A file holds a snapshot: the tensors' full storage (csv: the written rows only), the write
position, the ``filled`` flag and, for prioritized memories, the per-cell priorities, with
SHA-256 digests of all of it (see `kernelgym.memory.file_metadata`). Reading
validates the whole file, digests included, before anything is handed back, so a
truncated or corrupted file raises ``ValueError`` and a memory that loads it is left as
it was. Sizes claimed by a file are checked against the memory that loads it and against
the file's own size before anything is allocated from them.
"""

from __future__ import annotations

import io
import os
import tempfile
from typing import Any

import numpy as np
import torch

from . import csv_format
from .file_metadata import Layout, SizeMismatch, Snapshot, check, describe, parse, verified

__all__ = ["FORMATS", "Snapshot", "file_extension", "read_snapshot", "write_snapshot"]

#: accepted format names -> file extension ("np" is the seed's name for npz exports)
FORMATS = {"pt": "pt", "npz": "npz", "np": "npz", "csv": "csv"}


def file_extension(format: str, argument: str = "format") -> str:
    """Extension for a format name; ValueError for an unknown one."""
    if format not in FORMATS:
        raise ValueError(f"{argument}: expected one of {sorted(FORMATS)}, got {format!r}")
    return FORMATS[format]


def write_snapshot(path: str, snapshot: Snapshot, format: str) -> None:
    """Write a snapshot atomically (a crash never leaves a half-written file at ``path``)."""
    extension = file_extension(format)
    buffer = io.BytesIO() if extension != "csv" else io.StringIO()
    {"pt": _write_pt, "npz": _write_npz, "csv": csv_format.write}[extension](buffer, snapshot)
    data = buffer.getvalue()
    directory = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".memory-", suffix=".tmp")
    try:
        with os.fdopen(handle, "w" if extension == "csv" else "wb", newline="" if extension == "csv" else None) as file:
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def read_snapshot(path: str, memory_size: int | None = None, num_envs: int | None = None) -> Snapshot:
    """Read and verify a memory file; its format is taken from the extension.

    With ``memory_size`` and ``num_envs``, a file of another size is refused (``ValueError``
    naming both sizes) before any of its arrays is read.
    """
    extension = os.path.splitext(str(path))[1].lstrip(".")
    if extension not in ("pt", "npz", "csv"):
        raise ValueError(f"path: expected a .pt, .npz or .csv file, got {str(path)!r}")
    reader = {"pt": _read_pt, "npz": _read_npz, "csv": csv_format.read}[extension]
    try:
        return reader(path, lambda text: parse(text, memory_size, num_envs))
    except (FileNotFoundError, SizeMismatch):
        raise
    except Exception as error:
        raise ValueError(
            f"path: {str(path)!r} is not a valid {extension} memory file ({type(error).__name__}: {error})"
        ) from error


def _check_claim(layout: Layout, path: str) -> None:
    """pt and npz files hold every array uncompressed: the arrays cannot be larger than the file."""
    claimed, size = layout.nbytes(), os.path.getsize(path)
    check(claimed <= size, f"the metadata claims {claimed} bytes of arrays, the file has {size} bytes")


# -- pt: torch's zip format, loaded with weights_only=True (no code runs) ----------------------


def _write_pt(file, snapshot: Snapshot) -> None:
    metadata = describe(snapshot, snapshot.memory_size * snapshot.num_envs)
    torch.save({"metadata": metadata, "tensors": snapshot.tensors, "extra": snapshot.extra}, file)


def _read_pt(path: str, parse_metadata) -> Snapshot:
    # torch allocates only the storages the file holds (bounded by its size)
    content = torch.load(path, map_location="cpu", weights_only=True)
    check(isinstance(content, dict) and isinstance(content.get("metadata"), str), "no metadata")
    check(isinstance(content.get("tensors"), dict) and isinstance(content.get("extra"), dict), "no tensor tables")
    layout = parse_metadata(content["metadata"])
    _check_claim(layout, path)
    return verified(layout, content["tensors"], content["extra"], layout.capacity)


# -- npz: numpy arrays, loaded with allow_pickle=False ----------------------------------------


def _to_numpy(tensor: torch.Tensor) -> np.ndarray:
    try:
        return tensor.numpy()
    except TypeError:  # a dtype numpy lacks (bfloat16, ...): keep its bytes
        return tensor.contiguous().view(torch.uint8).numpy()


def _from_numpy(array: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    tensor = torch.from_numpy(np.ascontiguousarray(array))
    return tensor if tensor.dtype == dtype or tensor.dtype != torch.uint8 else tensor.view(dtype)


def _write_npz(file, snapshot: Snapshot) -> None:
    arrays: dict[str, Any] = {f"tensor.{name}": _to_numpy(tensor) for name, tensor in snapshot.tensors.items()}
    arrays |= {f"extra.{name}": _to_numpy(tensor) for name, tensor in snapshot.extra.items()}
    metadata = describe(snapshot, snapshot.memory_size * snapshot.num_envs)
    np.savez(file, metadata=np.array(metadata), **arrays)


def _member_bytes(archive, key: str) -> int:
    """Bytes of an npz member as its .npy header declares them, read without loading the data."""
    with archive.zip.open(key + ".npy") as member:
        version = np.lib.format.read_magic(member)
        reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = reader(member)
    check(not dtype.hasobject, f"array {key!r} holds Python objects")
    return int(np.prod(shape, dtype=object)) * dtype.itemsize


def _read_npz(path: str, parse_metadata) -> Snapshot:
    size = os.path.getsize(path)
    with np.load(path, allow_pickle=False) as archive:
        check("metadata" in archive.files, "no metadata")
        check(_member_bytes(archive, "metadata") <= size, "the metadata claims more bytes than the file has")
        layout = parse_metadata(str(archive["metadata"]))
        _check_claim(layout, path)
        expected = {(group, name): (dtype, shape) for group, name, dtype, shape in layout.arrays()}
        tables: dict[str, dict] = {"tensor": {}, "extra": {}}
        for key in archive.files:
            if key == "metadata":
                continue
            group, _, name = key.partition(".")
            check((group, name) in expected, f"unexpected array {key!r}")
            dtype, shape = expected[group, name]
            claimed = _member_bytes(archive, key)
            check(
                claimed == int(np.prod(shape)) * dtype.itemsize,
                f"array {key!r} declares {claimed} bytes, metadata says {dtype} {shape}",
            )
            tables[group][name] = _from_numpy(archive[key], dtype)
    return verified(layout, tables["tensor"], tables["extra"], layout.capacity)
