"""Launch a cuda kernel through a parameter buffer built once at bind: one driver call a launch.

numba-cuda's own launch (``kernel[grid, block, stream](*args)``) types every argument
(``typeof``) and converts it to ctypes (``_Kernel._prepare_args``) at every call, about
12 us an array on a 2-core VM; a CartPole step passes 34 arrays. The arrays kernelgym
binds never move (`kernelgym.core.binding` refuses a re-pointed tensor), so their kernel
parameters are the same at every launch. A `PrebuiltLaunch`:

- at bind, compiles the kernel for the bound values' types, asks numba-cuda's own
  ``_prepare_args`` for the parameter list (so the layout is numba's, whatever its
  version), writes it once into one buffer of 8-byte slots, and keeps the kernel's driver
  handle;
- checks, once, that the buffer holds byte for byte what cuda.core's ``ParamHolder``
  (numba-cuda's launch) would pass for the same list; any difference, or an argument kind
  it does not know, falls back to numba's launch with the reason logged once;
- at each call, reads torch's current stream (`kernelgym.core.streams`), rewrites the data
  pointer of a per-call array only when a different array is passed (same shape, dtype and
  strides as its template: the caller checks that), and makes one ``cuLaunchKernel``
  through ``cuda.bindings``. No allocation, no host synchronization.

`device_launch` picks the path for a bound kernel: the simulator and
``KERNELGYM_LAUNCH=numba`` take numba's launch (`kernelgym.core.streams.StreamLaunch`),
everything else the prebuilt one unless it is unavailable, which is logged. `launch_path`
tells which path a launch object took.

`stand_in_device_array` describes a host array's memory as a numba device array: the
tests prove the layout against ``_prepare_args`` with it. `stand_in_launches` prebuilds a
cpu binding's launches (`kernelgym.core.binding.LaunchRecord`: the same arguments a cuda
binding passes) over such stand-ins with the driver call replaced: the Python of a cuda
step, timed and counted without a GPU.
"""

from __future__ import annotations

import ctypes
import logging
import os
from typing import Any

import numpy as np

from kernelgym.core import streams

__all__ = [
    "LAUNCH_PATHS",
    "PrebuiltLaunch",
    "PrebuiltUnavailable",
    "device_launch",
    "launch_path",
    "parameter_bytes",
    "stand_in_device_array",
    "stand_in_launches",
]

logger = logging.getLogger(__name__)

#: The values ``KERNELGYM_LAUNCH`` takes: ``prebuilt`` (default) or numba-cuda's own ``numba``.
LAUNCH_PATHS = ("prebuilt", "numba")
_SLOT = 8  # every parameter numba-cuda passes is at most 8 bytes (complex: two parameters)
_logged: set[str] = set()


class PrebuiltUnavailable(Exception):
    """The prebuilt path cannot launch this kernel; the message says why."""


def _chosen_path() -> str:
    """``KERNELGYM_LAUNCH``, read at each bind (a benchmark compares both in one process)."""
    path = os.environ.get("KERNELGYM_LAUNCH", "prebuilt")
    if path not in LAUNCH_PATHS:
        raise ValueError(f"KERNELGYM_LAUNCH: expected one of {LAUNCH_PATHS}, got {path!r}")
    return path


def _log_once(reason: str) -> None:
    if reason not in _logged:
        _logged.add(reason)
        logger.warning("kernelgym: numba-cuda's launch path instead of the prebuilt one: %s", reason)


def device_launch(dispatcher, griddim, blockdim, arguments: tuple, per_call: tuple = (), *, simulator: bool):
    """The launch object for a bound cuda kernel: prebuilt where possible, else numba's.

    Parameters
    ----------
    dispatcher : numba.cuda dispatcher
    griddim, blockdim : int or tuple
    arguments : tuple
        The bound leading arguments (counts and device arrays).
    per_call : tuple
        Templates of the values passed at each call (same types and layouts as those calls).
    simulator : bool
        Numba's CUDA simulator: it has no driver, so numba's launch.

    Returns
    -------
    PrebuiltLaunch or kernelgym.core.streams.StreamLaunch
    """
    if simulator or _chosen_path() == "numba":
        return streams.StreamLaunch(dispatcher, griddim, blockdim, arguments, reconfigure=simulator)
    try:
        return PrebuiltLaunch.compile(dispatcher, griddim, blockdim, arguments, per_call)
    except PrebuiltUnavailable as why:
        _log_once(str(why))
    except Exception:
        pass  # a kernel that does not compile: numba's launch raises that at its first call, as before
    return streams.StreamLaunch(dispatcher, griddim, blockdim, arguments)


def launch_path(launch) -> str:
    """Which path a bound launch takes: ``"prebuilt"`` or ``"numba"`` (cuda, `device_launch`),
    ``"cpu"`` for anything else (a cpu launcher)."""
    if isinstance(launch, PrebuiltLaunch):
        return "prebuilt"
    return "numba" if isinstance(launch, streams.StreamLaunch) else "cpu"


def _slot_value(item):
    """One entry of numba-cuda's parameter list as the ctypes value cuda.core passes for it:
    Python ints as ``intptr_t`` and floats as ``double``; ctypes values as themselves."""
    if isinstance(item, ctypes._SimpleCData):
        return type(item)(item.value)
    if isinstance(item, (bool, np.bool_)):
        return ctypes.c_bool(bool(item))
    if isinstance(item, int):
        return ctypes.c_ssize_t(item)
    if isinstance(item, float):
        return ctypes.c_double(item)
    raise PrebuiltUnavailable(f"a kernel parameter of type {type(item).__name__} ({item!r}) has no known layout")


def _numba_parameters(argument_types, values, kernel=None) -> tuple[list, list[int]]:
    """numba-cuda's parameter list for ``values`` and where each value's parameters start."""
    try:
        if kernel is None:
            from numba.cuda.dispatcher import _Kernel

            kernel = _Kernel
        owner: Any = kernel if isinstance(kernel, type) else type(kernel)
        prepare = owner._prepare_args
    except (ImportError, AttributeError):
        raise PrebuiltUnavailable("this numba-cuda's kernels have no _prepare_args") from None
    extensions = () if isinstance(kernel, type) else getattr(kernel, "extensions", None) or ()
    if extensions:
        raise PrebuiltUnavailable(f"the kernel has argument extensions {list(extensions)}")
    items: list = []
    starts: list[int] = []
    # numba's method reads only `extensions` and itself (for tuples) of its kernel
    shim = type("KernelParameters", (), {"extensions": (), "_prepare_args": prepare})()
    for argument_type, value in zip(argument_types, values):
        starts.append(len(items))
        try:
            prepare(shim, argument_type, value, 0, [], items)
        except NotImplementedError:
            raise PrebuiltUnavailable(f"numba-cuda cannot pass an argument of type {argument_type}") from None
    return items, starts


def _check_against_param_holder(items, slots) -> None:
    """Refuse unless every slot holds the bytes cuda.core's ``ParamHolder`` passes for ``items``."""
    try:
        from cuda.core._kernel_arg_handler import ParamHolder
    except ImportError:
        raise PrebuiltUnavailable("cuda.core's ParamHolder cannot be imported to prove the layout") from None
    holder = ParamHolder(items)
    pointers = (ctypes.c_void_p * len(items)).from_address(holder.ptr) if items else ()
    for index, (item, slot) in enumerate(zip(items, slots)):
        expected = ctypes.string_at(pointers[index] or 0, ctypes.sizeof(slot))
        if expected != bytes(slot):
            raise PrebuiltUnavailable(
                f"parameter {index} ({item!r}): cuda.core passes {expected.hex()}, the prebuilt layout "
                f"{bytes(slot).hex()}"
            )


def parameter_bytes(argument_type) -> int:
    """The kernel-parameter bytes numba-cuda passes for one argument of ``argument_type``.

    An array passes meminfo, parent, size, itemsize and data, then its shape and strides
    (8 bytes each); a tuple the sum of its members; a scalar its width (complex: two).
    """
    from numba.core import types

    if isinstance(argument_type, types.Array):
        return _SLOT * (5 + 2 * argument_type.ndim)
    if isinstance(argument_type, types.BaseTuple):
        return sum(parameter_bytes(member) for member in argument_type)
    if isinstance(argument_type, types.Record):
        return _SLOT
    if isinstance(argument_type, types.Boolean):
        return 1
    if isinstance(argument_type, (types.Integer, types.Float, types.NPDatetime, types.NPTimedelta)):
        return argument_type.bitwidth // 8
    if isinstance(argument_type, types.Complex):
        return argument_type.bitwidth // 8
    raise TypeError(f"argument_type: expected an array, tuple, record or scalar numba type, got {argument_type}")


class PrebuiltLaunch:
    """A compiled cuda kernel, its parameters written once, launched with one driver call.

    Parameters
    ----------
    function : int
        The kernel's driver handle (``CUfunction`` or ``CUkernel``).
    griddim, blockdim : int or tuple
    items : list
        numba-cuda's parameter list for the bound values and the per-call templates.
    per_call : sequence of tuple
        For each per-call value, ``(index of its first parameter in items, its numba type,
        its template)``.
    values : tuple
        Everything the parameters point into: kept alive as long as the launch.
    kernel : numba-cuda kernel or class, optional
        Whose ``_prepare_args`` lays a new per-call value out (numba-cuda's own by default).
    launch_kernel : callable, optional
        ``cuLaunchKernel``'s signature; ``cuda.bindings.driver.cuLaunchKernel`` by default.
        The host-path benchmark passes a stand-in to time the Python around it.
    """

    __slots__ = (
        "_function",
        "_grid",
        "_block",
        "_storage",
        "_pointers",
        "_params_address",
        "_per_call",
        "_kernel",
        "_values",
        "_launch_kernel",
        "_success",
        "_streams",
        "num_parameters",
    )

    def __init__(self, function, griddim, blockdim, items, per_call=(), values=(), kernel=None, launch_kernel=None):
        self._grid = _dim3("griddim", griddim)
        self._block = _dim3("blockdim", blockdim)
        slots = [_slot_value(item) for item in items]
        self.num_parameters = len(slots)
        # one 8-byte slot a parameter, and the void* array cuLaunchKernel reads them through
        self._storage = (ctypes.c_uint64 * max(1, len(slots)))()
        self._write(0, slots)
        base = ctypes.addressof(self._storage)
        self._pointers = (ctypes.c_void_p * max(1, len(slots)))(*(base + _SLOT * i for i in range(len(slots))))
        self._params_address = ctypes.addressof(self._pointers)
        _check_against_param_holder(items, slots)
        # per call: [first parameter, numba type, value last written]; another value rewrites them
        self._per_call = tuple([start, numba_type, template] for start, numba_type, template in per_call)
        self._values, self._kernel = tuple(values), kernel
        if launch_kernel is None:
            from cuda.bindings import driver

            launch_kernel, self._success = driver.cuLaunchKernel, driver.CUresult.CUDA_SUCCESS
            self._function = driver.CUfunction(int(function))
        else:
            self._function, self._success = function, None
        self._launch_kernel = launch_kernel
        self._streams: dict = {}

    def _write(self, first: int, slots) -> None:
        base = ctypes.addressof(self._storage) + _SLOT * first
        for index, slot in enumerate(slots):
            ctypes.memmove(base + _SLOT * index, ctypes.addressof(slot), ctypes.sizeof(slot))

    @classmethod
    def compile(cls, dispatcher, griddim, blockdim, arguments: tuple, per_call: tuple = ()):
        """Compile ``dispatcher`` for ``arguments`` and ``per_call`` and prebuild its launch.

        Raises
        ------
        PrebuiltUnavailable
            A numba-cuda without the pieces this path reads, a kernel with extensions or in
            debug mode, an argument kind numba-cuda's launch does not pass, or a layout
            cuda.core would pass differently.
        """
        try:
            argument_types = tuple(dispatcher.typeof_pyval(value) for value in (*arguments, *per_call))
            kernel = dispatcher.compile(argument_types)
            if getattr(kernel, "debug", False) or getattr(kernel, "cooperative", False):
                raise PrebuiltUnavailable("the kernel was compiled with debug=True or cooperative=True")
            function = kernel._codelibrary.get_cufunc().handle
        except AttributeError as error:
            raise PrebuiltUnavailable(f"this numba-cuda's dispatcher or kernel lacks {error.name!r}") from None
        return cls.for_values(function, griddim, blockdim, arguments, per_call, argument_types, kernel=kernel)

    @classmethod
    def for_values(
        cls,
        function,
        griddim,
        blockdim,
        arguments,
        per_call=(),
        argument_types=None,
        *,
        kernel=None,
        launch_kernel=None,
    ):
        """Prebuild the launch of the compiled kernel ``function`` for these values.

        Parameters
        ----------
        function : int
            The kernel's driver handle.
        griddim, blockdim : int or tuple
        arguments, per_call : tuple
            Bound values, then templates of the per-call arrays (device arrays and ints).
        argument_types : tuple, optional
            Their numba types (typed here by default).
        kernel : numba-cuda kernel, optional
            Whose ``_prepare_args`` lays the parameters out (numba-cuda's own by default).
        launch_kernel : callable, optional
            Stands in for ``cuLaunchKernel`` (the host-path benchmark and tests).
        """
        values = (*arguments, *per_call)
        if argument_types is None:
            from numba.cuda.typing.typeof import Purpose, typeof

            argument_types = tuple(typeof(value, Purpose.argument) for value in values)
        items, starts = _numba_parameters(argument_types, values, kernel)
        per_call_entries = [
            (start, argument_type, template)
            for start, argument_type, template in zip(
                starts[len(arguments) :], argument_types[len(arguments) :], per_call
            )
        ]
        return cls(function, griddim, blockdim, items, per_call_entries, values, kernel, launch_kernel)

    def __call__(self, *per_call) -> None:
        """Launch on torch's current stream (asynchronous), ``per_call`` in template order."""
        entries = self._per_call
        index = 0
        while index < len(entries):  # no zip or range object: a launch allocates nothing
            if per_call[index] is not entries[index][2]:
                self._rewrite(index, per_call[index])
            index += 1
        handle = streams.current_stream()
        stream = self._streams.get(handle)
        if stream is None:
            stream = self._stream(handle)
        grid, block = self._grid, self._block
        result = self._launch_kernel(
            self._function, grid[0], grid[1], grid[2], block[0], block[1], block[2], 0, stream, self._params_address, 0
        )
        if self._success is not None and result[0] != self._success:
            self._retry_or_raise(result[0], stream)

    def _retry_or_raise(self, error, stream) -> None:
        """A thread without numba's context current (its first launch there): make it current
        as numba's own launch does, then launch once more; any other error raises."""
        from cuda.bindings import driver

        if error == driver.CUresult.CUDA_ERROR_INVALID_CONTEXT:
            from numba import cuda

            cuda.current_context()
            grid, block = self._grid, self._block
            error = self._launch_kernel(self._function, *grid, *block, 0, stream, self._params_address, 0)[0]
            if error == self._success:
                return
        raise RuntimeError(f"cuLaunchKernel: expected CUDA_SUCCESS, got {error!r}")

    def _stream(self, handle: int):
        """The driver's stream object for a raw handle, made once per handle."""
        if self._success is None:
            stream = handle  # a stand-in driver takes the handle itself
        else:
            from cuda.bindings import driver

            stream = driver.CUstream(handle)
        self._streams[handle] = stream
        return stream

    def _rewrite(self, index: int, value) -> None:
        """Write a per-call value other than the last one: numba-cuda's own parameters for it."""
        from numba.cuda.typing.typeof import Purpose, typeof

        entry = self._per_call[index]
        received = typeof(value, Purpose.argument)
        if received != entry[1]:
            raise TypeError(
                f"per-call value {index}: expected {entry[1]} (the type the kernel was compiled for), got {received}"
            )
        items, _ = _numba_parameters((entry[1],), (value,), self._kernel)
        self._write(entry[0], [_slot_value(item) for item in items])
        entry[2] = value

    def parameters(self) -> bytes:
        """The parameter bytes the next launch passes, 8 per parameter (for tests and audits)."""
        return bytes(self._storage)[: _SLOT * self.num_parameters]

    def __repr__(self):
        return f"<PrebuiltLaunch {self.num_parameters} parameters, grid {self._grid}, block {self._block}>"


def _dim3(name: str, dims) -> tuple[int, int, int]:
    dims = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims)
    if not 1 <= len(dims) <= 3 or any(not isinstance(d, (int, np.integer)) or d < 1 for d in dims):
        raise ValueError(f"{name}: expected 1 to 3 positive ints, got {dims!r}")
    x, y, z = (*(int(d) for d in dims), 1, 1)[:3]
    return x, y, z


class _HostMemory:
    """What a numba device array reads of its memory: a pointer (here, host memory)."""

    __slots__ = ("device_ctypes_pointer",)

    def __init__(self, address: int):
        self.device_ctypes_pointer = ctypes.c_void_p(address)


def stand_in_device_array(host: np.ndarray):
    """A numba device array describing ``host``'s memory: same shape, strides, dtype, pointer.

    For proving the parameter layout and timing the host path without a GPU; a kernel must
    never run on it. ``host`` must outlive it and hold at least one element.
    """
    from numba.cuda.cudadrv.devicearray import DeviceNDArray

    if not isinstance(host, np.ndarray) or host.size == 0:
        raise ValueError(f"host: expected a numpy array of at least one element, got {host!r}")
    return DeviceNDArray(host.shape, host.strides, host.dtype, gpu_data=_HostMemory(host.ctypes.data))


def stand_in_launches(bound, launch_kernel) -> tuple[list[PrebuiltLaunch], list[tuple], list[tuple]]:
    """A cpu binding's launches prebuilt over stand-ins of its arrays, launching through ``launch_kernel``.

    Parameters
    ----------
    bound : kernelgym.core.binding.BoundLaunch
        Bound on the ``cpu`` backend (its records hold host arrays).
    launch_kernel : callable
        Takes ``cuLaunchKernel``'s arguments and returns a tuple whose first item is ignored.

    Returns
    -------
    launches : list of PrebuiltLaunch
    arguments : list of tuple
        Each launch's bound arguments (stand-ins), as numba-cuda's launch would take them.
    per_call : list of tuple
        Each launch's per-call templates (stand-ins), to call it with.
    """

    def device(value):
        if isinstance(value, np.ndarray):
            return stand_in_device_array(value)
        if isinstance(value, tuple):
            return tuple(device(item) for item in value)
        return value

    launches, bound_arguments, per_call = [], [], []
    for record in bound.records:
        templates = tuple(device(value) for value in record.per_call)
        arguments = tuple(device(value) for value in record.arguments)
        launches.append(
            PrebuiltLaunch.for_values(
                0, record.griddim, record.blockdim, arguments, templates, launch_kernel=launch_kernel
            )
        )
        bound_arguments.append(arguments)
        per_call.append(templates)
    return launches, bound_arguments, per_call
