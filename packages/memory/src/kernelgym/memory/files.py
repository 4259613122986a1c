"""Memory files in three formats (pt, npz, csv) that load without running any code.

A file holds a snapshot: the tensors' full storage (csv: the written rows only), the write
position, the ``filled`` flag and, for prioritized memories, the per-cell priorities.
Reading validates the whole file before anything is handed back, so a truncated or
corrupted file raises ``ValueError`` and a memory that loads it is left as it was.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import tempfile
from dataclasses import dataclass, field

import numpy as np
import torch

FILE_KIND = "kernelgym-memory"
FILE_VERSION = 1
#: accepted format names -> file extension ("np" is the seed's name for npz exports)
FORMATS = {"pt": "pt", "npz": "npz", "np": "npz", "csv": "csv"}
_CSV_MAGIC = "# " + FILE_KIND + " "


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


def file_extension(format: str, argument: str = "format") -> str:
    """Extension for a format name; ValueError for an unknown one."""
    if format not in FORMATS:
        raise ValueError(f"{argument}: expected one of {sorted(FORMATS)}, got {format!r}")
    return FORMATS[format]


def write_snapshot(path: str, snapshot: Snapshot, format: str) -> None:
    """Write a snapshot atomically (a crash never leaves a half-written file at ``path``)."""
    extension = file_extension(format)
    buffer = io.BytesIO() if extension != "csv" else io.StringIO()
    {"pt": _write_pt, "npz": _write_npz, "csv": _write_csv}[extension](buffer, snapshot)
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


def read_snapshot(path: str) -> Snapshot:
    """Read and validate a memory file; its format is taken from the extension."""
    extension = os.path.splitext(str(path))[1].lstrip(".")
    if extension not in ("pt", "npz", "csv"):
        raise ValueError(f"path: expected a .pt, .npz or .csv file, got {str(path)!r}")
    reader = {"pt": _read_pt, "npz": _read_npz, "csv": _read_csv}[extension]
    try:
        return reader(path)
    except FileNotFoundError:
        raise
    except Exception as error:  # noqa: BLE001 - every parse failure means the same to the caller
        raise ValueError(
            f"path: {str(path)!r} is not a valid {extension} memory file ({type(error).__name__}: {error})"
        ) from error


# -- metadata shared by all formats ------------------------------------------------------


def _metadata(snapshot: Snapshot) -> str:
    def describe(tensor: torch.Tensor) -> dict:
        return {"dtype": str(tensor.dtype).removeprefix("torch."), "shape": list(tensor.shape)}

    return json.dumps(
        {
            "kind": FILE_KIND,
            "version": FILE_VERSION,
            "memory_size": snapshot.memory_size,
            "num_envs": snapshot.num_envs,
            "position": snapshot.position,
            "filled": snapshot.filled,
            "tensors": {
                name: {**describe(tensor), "keep_dimensions": snapshot.keep_dimensions[name]}
                for name, tensor in snapshot.tensors.items()
            },
            "extra": {name: describe(tensor) for name, tensor in snapshot.extra.items()},
        }
    )


@dataclass
class _Layout:
    """Validated metadata: what the arrays must look like."""

    memory_size: int
    num_envs: int
    position: int
    filled: bool
    tensors: dict[str, tuple[torch.dtype, tuple[int, ...]]]
    keep_dimensions: dict[str, bool]
    extra: dict[str, tuple[torch.dtype, tuple[int, ...]]]


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


def _parse_dtype(name) -> torch.dtype:
    dtype = getattr(torch, name, None) if isinstance(name, str) else None
    _check(isinstance(dtype, torch.dtype), f"unknown dtype {name!r}")
    return dtype


def _parse_metadata(text: str) -> _Layout:
    meta = json.loads(text)
    _check(isinstance(meta, dict) and meta.get("kind") == FILE_KIND, "not a kernelgym memory file")
    _check(meta.get("version") == FILE_VERSION, f"unsupported file version {meta.get('version')!r}")
    ints = {key: meta.get(key) for key in ("memory_size", "num_envs", "position")}
    _check(all(type(value) is int for value in ints.values()), f"bad sizes {ints}")
    memory_size, num_envs, position = ints.values()
    _check(memory_size >= 1 and num_envs >= 1, f"bad sizes {ints}")
    _check(0 <= position < memory_size * num_envs, f"bad position {position}")
    _check(type(meta.get("filled")) is bool, f"bad filled flag {meta.get('filled')!r}")

    def shapes(entries, leading: tuple[int, ...]) -> dict:
        _check(isinstance(entries, dict), "bad tensor table")
        out = {}
        for name, entry in entries.items():
            shape = entry.get("shape") if isinstance(entry, dict) else None
            _check(
                isinstance(shape, list) and all(type(dim) is int and dim >= 1 for dim in shape),
                f"bad shape for {name!r}",
            )
            _check(tuple(shape[: len(leading)]) == leading, f"shape of {name!r} does not start with {leading}")
            out[name] = (_parse_dtype(entry.get("dtype")), tuple(shape))
        return out

    tensors = shapes(meta.get("tensors"), (memory_size, num_envs))
    keep = {name: meta["tensors"][name].get("keep_dimensions") for name in tensors}
    _check(all(type(flag) is bool for flag in keep.values()), "bad keep_dimensions flags")
    extra = shapes(meta.get("extra", {}), (memory_size * num_envs,))
    return _Layout(memory_size, num_envs, position, meta["filled"], tensors, keep, extra)


def _snapshot(layout: _Layout, tensors: dict, extra: dict) -> Snapshot:
    for table, expected in ((tensors, layout.tensors), (extra, layout.extra)):
        _check(set(table) == set(expected), f"arrays {sorted(table)} do not match the metadata {sorted(expected)}")
        for name, tensor in table.items():
            dtype, shape = expected[name]
            _check(isinstance(tensor, torch.Tensor), f"{name!r} is not a tensor")
            _check(
                tensor.dtype == dtype and tuple(tensor.shape) == shape,
                f"{name!r} is {tensor.dtype} {tuple(tensor.shape)}, metadata says {dtype} {shape}",
            )
    return Snapshot(
        layout.memory_size, layout.num_envs, layout.position, layout.filled, tensors, layout.keep_dimensions, extra
    )


# -- pt: torch's zip format, loaded with weights_only=True (no code runs) ----------------------


def _write_pt(file, snapshot: Snapshot) -> None:
    torch.save({"metadata": _metadata(snapshot), "tensors": snapshot.tensors, "extra": snapshot.extra}, file)


def _read_pt(path: str) -> Snapshot:
    content = torch.load(path, map_location="cpu", weights_only=True)
    _check(isinstance(content, dict) and isinstance(content.get("metadata"), str), "no metadata")
    _check(isinstance(content.get("tensors"), dict) and isinstance(content.get("extra"), dict), "no tensor tables")
    return _snapshot(_parse_metadata(content["metadata"]), content["tensors"], content["extra"])


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
    arrays = {f"tensor.{name}": _to_numpy(tensor) for name, tensor in snapshot.tensors.items()}
    arrays |= {f"extra.{name}": _to_numpy(tensor) for name, tensor in snapshot.extra.items()}
    np.savez(file, metadata=np.array(_metadata(snapshot)), **arrays)


def _read_npz(path: str) -> Snapshot:
    with np.load(path, allow_pickle=False) as archive:
        layout = _parse_metadata(str(archive["metadata"]))
        tables: dict[str, dict] = {"tensor": {}, "extra": {}}
        expected = {"tensor": layout.tensors, "extra": layout.extra}
        for key in archive.files:
            if key == "metadata":
                continue
            group, _, name = key.partition(".")
            _check(group in tables and name in expected[group], f"unexpected array {key!r}")
            tables[group][name] = _from_numpy(archive[key], expected[group][name][0])
    return _snapshot(layout, tables["tensor"], tables["extra"])


# -- csv: a metadata comment line, a header, then one line per written cell -------------------


def _columns(name: str, shape: tuple[int, ...], leading: int) -> list[str]:
    return [f"{name}.{index}" for index in range(math.prod(shape[leading:]))]


def _write_csv(file, snapshot: Snapshot) -> None:
    count, capacity = snapshot.count, snapshot.memory_size * snapshot.num_envs
    blocks, header = [], []
    for name, tensor in snapshot.tensors.items():
        blocks.append(tensor.reshape(capacity, -1)[:count])
        header += _columns(name, tuple(tensor.shape), 2)
    for name, tensor in snapshot.extra.items():
        blocks.append(tensor.reshape(capacity, -1)[:count])
        header += _columns(name, tuple(tensor.shape), 1)
    # numpy's str() of a float is the shortest text that parses back to the same value
    text = [(block.float() if block.dtype == torch.bfloat16 else block).numpy().astype(str) for block in blocks]
    file.write(_CSV_MAGIC + _metadata(snapshot) + "\n")
    writer = csv.writer(file)
    writer.writerow(header)
    writer.writerows(np.concatenate(text, axis=1) if text else np.empty((count, 0), dtype=str))


def _parse_block(cells: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    if dtype == torch.bool:
        _check(bool(np.isin(cells, ("True", "False")).all()), "bool column with values other than True/False")
        return torch.from_numpy(cells == "True")
    if dtype.is_complex:
        return torch.from_numpy(cells.astype(np.complex128)).to(dtype)
    if dtype.is_floating_point:
        return torch.from_numpy(cells.astype(np.float64)).to(dtype)
    return (
        torch.from_numpy(cells.astype(np.int64)).to(dtype)
        if dtype != torch.uint64
        else torch.from_numpy(cells.astype(np.uint64))
    )


def _read_csv(path: str) -> Snapshot:
    with open(path, newline="") as file:
        first = file.readline()
        _check(first.startswith(_CSV_MAGIC), "no kernelgym metadata line")
        layout = _parse_metadata(first[len(_CSV_MAGIC) :])
        rows = list(csv.reader(file))
    capacity = layout.memory_size * layout.num_envs
    count = capacity if layout.filled else layout.position
    expected_header = [column for name, (_, shape) in layout.tensors.items() for column in _columns(name, shape, 2)]
    expected_header += [column for name, (_, shape) in layout.extra.items() for column in _columns(name, shape, 1)]
    _check(bool(rows) and rows[0] == expected_header, "header does not match the metadata")
    _check(len(rows) - 1 == count, f"{len(rows) - 1} data rows, metadata says {count}")
    _check(all(len(row) == len(expected_header) for row in rows[1:]), "a data row has the wrong number of columns")
    cells = np.array(rows[1:], dtype=str).reshape(count, len(expected_header))
    column, tables = 0, []
    # rows the file does not hold were never written: NaN in tensors (as a new memory), 0 in extra state
    for table, leading, blank in ((layout.tensors, 2, float("nan")), (layout.extra, 1, 0)):
        parsed = {}
        for name, (dtype, shape) in table.items():
            width = math.prod(shape[leading:])
            full = torch.zeros((capacity, width), dtype=dtype)
            if dtype.is_floating_point or dtype.is_complex:
                full.fill_(blank)
            full[:count] = _parse_block(cells[:, column : column + width], dtype)
            parsed[name] = full.reshape(shape)
            column += width
        tables.append(parsed)
    return _snapshot(layout, *tables)
