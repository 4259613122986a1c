"""Count the host reads of tensor values that torch code makes, on any device.

A host read is what makes the host wait for the device on a GPU: a scalar read
(``.item()``, ``float(t)``, ``bool(t)``, ``if t:``, all ``aten._local_scalar_dense``),
``.tolist()``, an op whose output shape depends on the data (``nonzero``,
``masked_select``, ``unique``, indexing by a bool mask), and a copy from a device to the
host. On the cpu backend none of them waits, but each one is a sync on cuda: counting
them on the CPU finds, in CI, what would stall a GPU and what a CUDA graph cannot
capture.

```python
from kernelgym.collectors.host_reads import HostReads

with HostReads() as reads:
    collector.collect()
assert not reads.reads, reads.summary()
```
"""

from __future__ import annotations

import traceback
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["HostReads"]

# aten ops that read a value on the host, or whose output size depends on the data
_READ_OPS = {
    "aten._local_scalar_dense",
    "aten.nonzero",
    "aten.masked_select",
    "aten._unique2",
    "aten.unique_dim",
    "aten.unique_consecutive",
}
# indexing by a bool (or uint8) mask finds the set elements first: a nonzero inside
_MASK_INDEX_OPS = {"aten.index", "aten.index_put", "aten.index_put_", "aten._index_put_impl_"}
# frames of these files are torch's or ours, never where the read was asked for
_TORCH_DIR = str(Path(torch.__file__).resolve().parent)
_THIS_FILE = str(Path(__file__).resolve())


def _is_mask(value) -> bool:
    return isinstance(value, torch.Tensor) and value.dtype in (torch.bool, torch.uint8)


def _caller() -> str:
    """``file:line`` of the innermost frame outside torch and this module."""
    for frame in reversed(traceback.extract_stack()):
        path = str(Path(frame.filename).resolve())
        if not path.startswith(_TORCH_DIR) and path != _THIS_FILE:
            return f"{frame.filename}:{frame.lineno}"
    return "unknown"


class _Ops(TorchDispatchMode):
    def __init__(self, reads: list[str]):
        super().__init__()
        self.reads = reads

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func._schema.name.replace("::", ".")
        if name in _READ_OPS:
            self.reads.append(f"{name} at {_caller()}")
        elif name in _MASK_INDEX_OPS and len(args) > 1 and any(_is_mask(i) for i in (args[1] or ())):
            self.reads.append(f"{name} with a bool mask at {_caller()}")
        elif name in ("aten._to_copy", "aten.copy_"):
            # a copy whose source is on a device and whose target is the host
            source = args[0] if name == "aten._to_copy" else args[1]
            target = kwargs.get("device") if name == "aten._to_copy" else args[0].device
            if (
                isinstance(source, torch.Tensor)
                and source.device.type != "cpu"
                and target is not None
                and torch.device(target).type == "cpu"
            ):
                self.reads.append(f"{name} from {source.device} to the host at {_caller()}")
        return func(*args, **kwargs)


class _Methods(TorchFunctionMode):
    """``Tensor.tolist`` reads every value without dispatching an aten op: seen here."""

    def __init__(self, reads: list[str]):
        super().__init__()
        self.reads = reads

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.Tensor.tolist:
            self.reads.append(f"Tensor.tolist at {_caller()}")
        return func(*args, **(kwargs or {}))


class HostReads:
    """A context in which every host read of a tensor value is recorded.

    Attributes
    ----------
    reads : list of str
        One entry per read, in order: what read (the aten op or ``Tensor.tolist``) and
        where (``file:line`` of the first frame outside torch).

    Notes
    -----
    It sees torch ops only: a read through another library (numba's ``copy_to_host``,
    ``torch.cuda.synchronize()``) is not counted. Every op in the context runs through
    Python dispatch, several times slower: count a short region.
    """

    def __init__(self):
        self.reads: list[str] = []
        self._modes = (_Methods(self.reads), _Ops(self.reads))

    def __enter__(self) -> HostReads:
        for mode in self._modes:
            mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        for mode in reversed(self._modes):
            mode.__exit__(*exc)

    def summary(self, limit: int = 3) -> str:
        """``"N host reads: first, second, ..."`` (the first ``limit``)."""
        shown = "; ".join(self.reads[:limit]) + ("; ..." if len(self.reads) > limit else "")
        return f"{len(self.reads)} host read(s): {shown}" if self.reads else "no host read"
