"""csv memory files: a metadata comment line, a header, then one line per written cell.

Values are written so that they read back bit for bit: integers and booleans as text,
floating-point values (of any width) as the shortest text of their exact float64 value,
a NaN other than the default one as ``nan:0x<bits>``, complex values as two columns
(``.real``, ``.imag``). Reading refuses text that does not fit the column's dtype
(``300`` in an ``int8`` column, ``1e300`` in a ``float32`` one) instead of wrapping it.
"""

from __future__ import annotations

import csv
import math
import os

import numpy as np
import torch

from .file_metadata import Layout, Snapshot, check, describe, verified

MAGIC = "# kernelgym-memory "
#: integer dtypes of the same width, to read and write a float's bits
_BITS = {2: torch.int16, 4: torch.int32, 8: torch.int64}


def _columns(name: str, dtype: torch.dtype, shape: tuple[int, ...], leading: int) -> list[str]:
    width = math.prod(shape[leading:])
    if dtype.is_complex:
        return [f"{name}.{index}.{part}" for index in range(width) for part in ("real", "imag")]
    return [f"{name}.{index}" for index in range(width)]


def _default_nan_bits(dtype: torch.dtype) -> int:
    return int(torch.tensor(float("nan"), dtype=dtype).view(_BITS[dtype.itemsize]))


def _float_text(block: torch.Tensor) -> np.ndarray:
    """Text of a float block that parses back to the same bits."""
    # every float16/bfloat16/float32 value is exactly a float64, whose shortest text is exact
    text = block.double().numpy().astype(str)
    bits = block.view(_BITS[block.dtype.itemsize])
    odd_nans = torch.isnan(block) & (bits != _default_nan_bits(block.dtype))
    if bool(odd_nans.any()):
        mask = (1 << (8 * block.dtype.itemsize)) - 1
        text = text.astype(object)
        for cell, value in zip(odd_nans.nonzero().tolist(), bits[odd_nans].tolist()):
            text[tuple(cell)] = f"nan:{value & mask:#x}"
    return text


def _text(block: torch.Tensor) -> np.ndarray:
    if block.dtype.is_complex:
        return _float_text(torch.view_as_real(block).reshape(block.shape[0], -1))
    if block.dtype.is_floating_point:
        return _float_text(block)
    return block.numpy().astype(str)  # integers and True/False


def write(file, snapshot: Snapshot) -> None:
    count, capacity = snapshot.count, snapshot.memory_size * snapshot.num_envs
    blocks, header = [], []
    for table, leading in ((snapshot.tensors, 2), (snapshot.extra, 1)):
        for name, tensor in table.items():
            blocks.append(_text(tensor.reshape(capacity, -1)[:count]))
            header += _columns(name, tensor.dtype, tuple(tensor.shape), leading)
    file.write(MAGIC + describe(snapshot, count) + "\n")
    writer = csv.writer(file)
    writer.writerow(header)
    writer.writerows(np.concatenate(blocks, axis=1) if blocks else np.empty((count, 0), dtype=str))


def _refuse(cells: np.ndarray, bad: np.ndarray, columns: list[str], expected: str) -> None:
    if bad.any():
        row, column = np.argwhere(bad)[0]
        raise ValueError(f"column {columns[column]!r}, data row {row}: expected {expected}, got {cells[row, column]!r}")


def _parse_floats(cells: np.ndarray, dtype: torch.dtype, columns: list[str]) -> torch.Tensor:
    odd_nans = np.char.startswith(cells, "nan:")
    values = np.where(odd_nans, "nan", cells).astype(np.float64)
    tensor = torch.from_numpy(values).to(dtype)
    finfo = torch.finfo(dtype)
    _refuse(cells, np.isfinite(values) & ~torch.isfinite(tensor).numpy(), columns, f"a {dtype} in ±{finfo.max}")
    if odd_nans.any():
        width = 8 * dtype.itemsize
        bits = tensor.view(_BITS[dtype.itemsize])
        for row, column in np.argwhere(odd_nans):
            value = int(cells[row, column][4:], 16)
            check(0 <= value < 1 << width, f"column {columns[column]!r}: NaN bits {cells[row, column]!r} too wide")
            bits[row, column] = value - (1 << width) if value >= 1 << (width - 1) else value
        _refuse(cells, odd_nans & ~torch.isnan(tensor).numpy(), columns, "the bits of a NaN")
    return tensor


def _parse_block(cells: np.ndarray, dtype: torch.dtype, columns: list[str]) -> torch.Tensor:
    if dtype == torch.bool:
        _refuse(cells, ~np.isin(cells, ("True", "False")), columns, "True or False")
        return torch.from_numpy(cells == "True")
    if dtype.is_complex:
        parts = _parse_floats(cells, dtype.to_real(), columns)
        return torch.view_as_complex(parts.reshape(cells.shape[0], -1, 2).contiguous())
    if dtype.is_floating_point:
        return _parse_floats(cells, dtype, columns)
    # int64 (or uint64) holds every integer dtype's range; numpy refuses text beyond it
    values = cells.astype(np.uint64 if dtype == torch.uint64 else np.int64)
    info = torch.iinfo(dtype)
    _refuse(cells, (values < info.min) | (values > info.max), columns, f"a {dtype} in [{info.min}, {info.max}]")
    return torch.from_numpy(values).to(dtype)


def read(path: str, parse_metadata) -> Snapshot:
    size = os.path.getsize(path)
    with open(path, newline="") as file:
        first = file.readline()
        check(first.startswith(MAGIC), "no kernelgym metadata line")
        layout: Layout = parse_metadata(first[len(MAGIC) :])
        reader = csv.reader(file)
        header = next(reader, [])
        # each column takes at least two characters: a wider claim is refused before any list is built
        check(layout.cell_width() <= size, f"the metadata claims {layout.cell_width()} columns per cell")
        expected_header = [
            column
            for group, name, dtype, shape in layout.arrays()
            for column in _columns(name, dtype, shape, 2 if group == "tensor" else 1)
        ]
        check(header == expected_header, "header does not match the metadata")
        rows = list(reader)
    count, capacity = layout.count, layout.capacity
    check(len(rows) == count, f"{len(rows)} data rows, metadata says {count}")
    check(all(len(row) == len(header) for row in rows), "a data row has the wrong number of columns")
    cells = np.array(rows, dtype=str).reshape(count, len(header))
    column = 0
    tables: dict[str, dict[str, torch.Tensor]] = {"tensor": {}, "extra": {}}
    # rows the file does not hold were never written: NaN in tensors (as a new memory), 0 in extra state
    for group, name, dtype, shape in layout.arrays():
        names = _columns(name, dtype, shape, 2 if group == "tensor" else 1)
        full = torch.zeros((capacity, math.prod(shape) // capacity), dtype=dtype)
        if group == "tensor" and (dtype.is_floating_point or dtype.is_complex):
            full.fill_(float("nan"))
        full[:count] = _parse_block(cells[:, column : column + len(names)], dtype, names)
        tables[group][name] = full.reshape(shape)
        column += len(names)
    return verified(layout, tables["tensor"], tables["extra"], count)
