"""Launch cuda kernels on torch's current CUDA stream, read at each call.

numba launches a kernel on the stream its launch was configured with; torch runs its
work on its *current* stream, which ``with torch.cuda.stream(s):`` and
``torch.cuda.graph`` change. A launch configured once for stream 0 is not ordered with
torch's copy of the actions or its reads of the outputs on ``s``, and CUDA-graph capture
(on a side stream) fails. So every cuda launch asks `current_stream` at call time and
runs on that stream:

- `current_stream` returns torch's current stream as a raw handle (an int; 0 is the
  default stream). It costs two C calls; it allocates nothing and never synchronizes.
  Without torch in the process, without a usable torch CUDA, or in Numba's CUDA
  simulator (which has no streams: its kernels run in the calling thread), it is 0 and
  kernels run on the default stream, as numba's own launches do.
- `numba_stream` wraps a handle once (``numba.cuda.external_stream``) and keeps the
  wrapper, so one torch stream is one numba stream object.
- `StreamLaunch` is a bound launch: it keeps one configured kernel per stream handle,
  so a call costs the handle read, a dict lookup and the launch.
- `copy_to_host` and `copy_to_device` move a numba device array's values on that stream
  too: a host read waits for the kernels queued there (numba's stream 0 would not wait
  for a non-blocking torch stream).

`current_stream` and `numba_stream` are module attributes looked up at every call: a
test swaps `current_stream` to check, without a GPU, that launches ask for the stream at
each call. kernelgym launches on numba's current device: keep torch's current device the
same one.
"""

from __future__ import annotations

import sys

__all__ = ["StreamLaunch", "copy_to_device", "copy_to_host", "current_stream", "numba_stream"]


def _default_stream() -> int:
    return 0


def _resolve_reader() -> int:
    """Pick how to read torch's current stream (once torch is imported), and read it."""
    global _reader
    torch = sys.modules.get("torch")
    if torch is None:
        return 0  # nobody can have set a torch stream yet; look again at the next call
    from kernelgym.core.backends import simulator_enabled

    if simulator_enabled() or not torch.cuda.is_available():
        _reader = _default_stream
        return 0
    torch.cuda.init()  # the raw reads below need torch's CUDA state
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    device = getattr(torch._C, "_cuda_getDevice", None)
    if raw is None or device is None:  # a torch without the raw reads: the public, slower one
        current = torch.cuda.current_stream

        def read() -> int:
            return current().cuda_stream
    else:

        def read() -> int:
            return raw(device())

    _reader = read
    return read()


_reader = _resolve_reader


def current_stream() -> int:
    """The raw handle of torch's current CUDA stream on its current device.

    Returns
    -------
    int
        0 (the default stream) when torch is not imported, when torch has no usable
        CUDA, and in Numba's CUDA simulator.
    """
    return _reader()


_numba_streams: dict = {0: 0}  # handle -> numba stream (0: numba's default stream)


def numba_stream(handle: int):
    """The numba stream object for a raw stream handle (made once per handle).

    Returns
    -------
    int or numba.cuda.cudadrv.driver.Stream
        0 for the default stream, else ``numba.cuda.external_stream(handle)``.
    """
    stream = _numba_streams.get(handle)
    if stream is None:
        from numba import cuda

        # the wrapper does not own the stream: a handle torch reuses stays the same stream
        stream = _numba_streams[handle] = cuda.external_stream(handle)
    return stream


def copy_to_host(array):
    """A host copy of the numba device array ``array``, read after the work queued on
    torch's current stream (one host synchronization)."""
    handle = current_stream()
    if not handle:
        return array.copy_to_host()  # synchronous on the default stream
    stream = numba_stream(handle)
    host = array.copy_to_host(stream=stream)
    stream.synchronize()
    return host


def copy_to_device(array, values) -> None:
    """Write host ``values`` into the numba device array ``array`` on torch's current
    stream (ordered with the kernels queued there)."""
    handle = current_stream()
    if not handle:
        array.copy_to_device(values)
    else:
        array.copy_to_device(values, stream=numba_stream(handle))


class StreamLaunch:
    """A cuda kernel bound to its configuration and leading arguments, launched on
    torch's current stream at each call.

    Parameters
    ----------
    kernel : numba.cuda dispatcher
        Configured as ``kernel[griddim, blockdim, stream]``.
    griddim, blockdim : int or tuple
    arguments : tuple
        Passed first at every launch; a call's own arguments follow.
    reconfigure : bool
        Configure the kernel at every call (Numba's simulator: ``kernel[...]``
        configures the kernel object itself, which every binding shares).
    """

    __slots__ = ("_kernel", "_griddim", "_blockdim", "_arguments", "_configured", "_reconfigure")

    def __init__(self, kernel, griddim, blockdim, arguments: tuple = (), reconfigure: bool = False):
        self._kernel, self._griddim, self._blockdim = kernel, griddim, blockdim
        self._arguments = tuple(arguments)
        self._configured: dict = {}  # stream handle -> configured kernel
        self._reconfigure = reconfigure

    def __call__(self, *per_call) -> None:
        """Launch on torch's current stream (asynchronous on a GPU)."""
        handle = current_stream()
        configured = None if self._reconfigure else self._configured.get(handle)
        if configured is None:
            configured = self.configure(handle)
        configured(*self._arguments, *per_call)

    def configure(self, handle: int):
        """The kernel configured for the stream ``handle`` (kept unless ``reconfigure``)."""
        configured = self._kernel[self._griddim, self._blockdim, numba_stream(handle)]
        if not self._reconfigure:
            self._configured[handle] = configured
        return configured
