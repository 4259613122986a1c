"""``Memory``: circular buffers of shape (memory_size, num_envs, ...) on any torch device.

Cells are written in row-major order, ``cell = memory_index * num_envs + env_index``,
from a single linear write position. A batch of ``num_envs`` samples fills one row; a
smaller batch fills part of a row and one that reaches the end of a row continues on the
next. Cells that were never written are never returned by any sampling method.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import torch

from . import files
from .kernel_interop import KernelInterop
from .persistence import Persistence
from .sampling import Sampler
from .storage import TensorStorage
from .validation import check_int
from .writing import SampleWriter


class Memory(TensorStorage, SampleWriter, Sampler, Persistence, KernelInterop):
    """Base class of the memories: circular buffers with two indexes (memory and env).

    Parameters
    ----------
    memory_size : int
        Rows of every tensor (time steps kept per environment).
    num_envs : int
        Parallel environments (columns).
    device : str or torch.device, optional
        Where tensors live; None picks ``"cuda:0"`` when available, else ``"cpu"``.
    export : bool
        Save the memory to a file every time it fills up.
    export_format : {"pt", "npz", "np", "csv"}
        Format of those files (``"np"`` is an alias of ``"npz"``).
    export_directory : str
        Folder under which ``memories/`` receives the exports ("" is the working directory).
    seed : int or torch.Generator, optional
        Seeds sampling: an int makes a generator on ``device``; a generator is used as is.
    episode_end_names : sequence of str
        Tensors that mark the end of an episode (e.g. ``terminated`` and ``truncated``).
        Sequences never cross a cell where one of those that exist is true.

    Notes
    -----
    The methods come from mixins, one per concern: `TensorStorage`
    (tensors, indexes), `SampleWriter` (``add_samples``),
    `Sampler`, `Persistence` (``save``/``load``)
    and `KernelInterop` (storage that kernels write). Writes,
    ``save``, ``load`` and ``reset`` hold one re-entrant lock: they may run in different threads.
    """

    def __init__(
        self,
        memory_size: int,
        num_envs: int = 1,
        device: str | torch.device | None = None,
        export: bool = False,
        export_format: str = "pt",
        export_directory: str = "",
        *,
        seed: int | torch.Generator | None = None,
        episode_end_names: Sequence[str] = ("terminated", "truncated"),
    ) -> None:
        self.memory_size = check_int(memory_size, "memory_size")
        self.num_envs = check_int(num_envs, "num_envs")
        if device is None:
            device = "cuda:0" if torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device: {device!r} was asked for, but torch sees no usable CUDA GPU")
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())  # tensors report an index
        files.file_extension(export_format, "export_format")
        self.export = bool(export)
        self.export_format = export_format
        self.export_directory = export_directory
        if isinstance(episode_end_names, str) or not all(isinstance(name, str) for name in episode_end_names):
            raise TypeError(f"episode_end_names: expected a sequence of tensor names, got {episode_end_names!r}")
        self.episode_end_names = tuple(episode_end_names)
        self.generator = self._make_generator(seed)

        self.tensors: dict[str, torch.Tensor] = {}
        self.tensors_view: dict[str, torch.Tensor] = {}
        self.tensors_keep_dimensions: dict[str, bool] = {}
        self.sampling_indexes: torch.Tensor | None = None

        self._capacity = self.memory_size * self.num_envs
        self._position = 0  # next cell to write, in [0, capacity)
        self._filled = False
        self._sample_shapes: dict[str, tuple[int, ...]] = {}
        self._full_row_specs: dict[str, tuple[torch.dtype, torch.Size]] = {}  # dtype, shape of one row
        self._row_views: dict[str, list[torch.Tensor]] = {}
        self._skipped_names: set[str] = set()
        self._absent_names: set[str] = set()  # created with size=None: skipped, sampled as None
        self._arrays_handed_out = False
        self._attached_names: set[str] = set()  # adopted by attach_tensor: their owners write them
        self._lock = threading.RLock()
        self._tracks_writes = type(self)._on_written is not SampleWriter._on_written  # subclass hook to call per add

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        del state["_lock"]  # a lock does not pickle; the copy gets its own
        return state

    def __setstate__(self, state: dict) -> None:
        state.setdefault("_attached_names", set())  # pickled before attached tensors were tracked
        state.setdefault("_absent_names", set())  # pickled before size=None tensors were accepted
        self.__dict__.update(state)
        self._lock = threading.RLock()
