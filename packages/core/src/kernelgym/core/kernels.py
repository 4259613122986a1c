"""Write-once kernels: one per-env (or per-agent) body, a cpu loop and a CUDA kernel.

```python
from kernelgym.core import env_kernel

@env_kernel
def add_one(i, x):
    x[i] += 1.0

add_one.launch("cpu", x.shape[0], x)
```

Nothing compiles when the decorator runs. The first launch with a given number of
arguments writes a small launcher module (see `kernelgym.core.codegen`); the cpu
build is cached on disk, so later processes load it instead of compiling.
"""

from __future__ import annotations

import functools
import inspect
import math
import operator
import re
import sys
from typing import Any

import numpy as np
from numba.core.errors import TypingError

from kernelgym.core import codegen, compile_log, extents, streams
from kernelgym.core.arrays import check_supported_dtype, is_device_array, is_torch_tensor
from kernelgym.core.backends import resolve_backend, simulator_enabled
from kernelgym.core.device_functions import device_function, register_cuda_overloads
from kernelgym.core.extents import MAX_COUNT, check_scalar

__all__ = [
    "EnvKernel",
    "AgentKernel",
    "env_kernel",
    "agent_kernel",
    "kernel_argument",
    "ENV_THREADS_PER_BLOCK",
    "MAX_AGENT_THREADS",
    "KernelTypingError",
    "agent_grid",
]

ENV_THREADS_PER_BLOCK = 128
MAX_AGENT_THREADS = 256


def agent_grid(num_envs: int, num_agents: int) -> tuple[int, int]:
    """(blocks, threads per block) of an agent kernel's cuda launch (both counts >= 1).

    One thread per agent, each env's agents consecutive, whole envs packed into blocks of at
    most `MAX_AGENT_THREADS` threads (`launch_fit.agent_block` chooses how many; the generated
    launcher finds its env and agent from the block size, `kernelgym.core.codegen.AGENT_HEAD`):
    11 agents run 11 envs in a 121-thread block, 1,000 agents one env in a 256-thread block
    that strides.
    """
    from kernelgym.core.launch_fit import agent_block

    envs_per_block, per_env = agent_block(num_agents, MAX_AGENT_THREADS)
    envs_per_block = min(envs_per_block, num_envs)
    return math.ceil(num_envs / envs_per_block), envs_per_block * per_env


SCALAR_TYPES = (bool, int, float, complex, np.generic)

compile_log.install()  # every launcher's compilation is logged, with its time


def check_count(name: str, value, minimum: int = 0) -> int:
    """``value`` as an int in ``[minimum, 2**63 - 1]`` (a launcher's int64 loop bound), else a
    TypeError/ValueError naming ``name``."""
    if isinstance(value, bool):
        raise TypeError(f"{name}: expected an int, got bool {value!r}")
    try:
        count = operator.index(value)
    except TypeError:
        raise TypeError(f"{name}: expected an int, got {type(value).__name__} {value!r}") from None
    if count < minimum:
        raise ValueError(f"{name}: expected an int >= {minimum}, got {count}")
    if count > MAX_COUNT:
        raise ValueError(f"{name}: expected an int <= {MAX_COUNT} (an int64 count), got {count}")
    return count


def kernel_argument(backend: str, label: str, value):
    """Check one launch argument (``label`` names it in errors) for ``backend``; torch tensors become arrays."""
    if isinstance(value, SCALAR_TYPES):
        check_scalar(label, value)
        return value
    if isinstance(value, tuple):
        return tuple(kernel_argument(backend, label, item) for item in value)
    if is_torch_tensor(value):
        _check_tensor(backend, label, value)
    if backend == "cpu":
        if is_torch_tensor(value) and not value.is_cuda:
            value = value.detach().numpy()
        if isinstance(value, np.ndarray):
            if value.dtype == object:
                raise TypeError(f"{label}: expected a numeric array, got dtype object")
            check_supported_dtype(label, value.dtype)
            return value
        raise TypeError(f"{label}: backend 'cpu' expected a numpy array or a scalar, got {type(value).__name__}")
    if is_device_array(value):
        return value
    if backend == "cuda" and hasattr(value, "__cuda_array_interface__"):
        from numba import cuda

        # sync=False: consuming a foreign array must not synchronize the host.
        return cuda.as_cuda_array(value, sync=False)
    raise TypeError(
        f"{label}: backend {backend!r} expected a device array or a scalar, got {type(value).__name__}"
        " (copy host arrays once with CUDADataManager or numba.cuda.to_device)"
    )


def _check_tensor(backend: str, label: str, tensor) -> None:
    """Refuse a tensor no kernel can view (a meta or foreign-device tensor, bfloat16, ...)."""
    import torch

    device = "cpu" if backend == "cpu" else "cuda"
    if tensor.device.type != device:
        raise TypeError(f"{label}: backend {backend!r} expected a {device} tensor, got a {tensor.device.type} tensor")
    try:
        dtype = torch.empty((), dtype=tensor.dtype).numpy().dtype
    except TypeError:
        raise TypeError(
            f"{label}: expected a tensor dtype numpy and Numba know (e.g. torch.float32), got {tensor.dtype}"
        ) from None
    check_supported_dtype(label, dtype)
    if tensor.requires_grad:
        # a launch reads and writes the storage outside autograd: torch refuses in-place writes
        # to such a tensor, and its numpy() refuses to hand the storage out; so does a launch
        raise TypeError(
            f"{label}: expected a tensor that does not require grad (a launch writes it in place, "
            f"outside autograd), got one with requires_grad=True; pass tensor.detach()"
        )
    if tensor.is_conj() or tensor.is_neg():
        raise TypeError(
            f"{label}: expected a tensor without a lazy conjugate/negative bit, got one; "
            "pass tensor.resolve_conj().resolve_neg()"
        )


def check_launch(kernel, labels, args, num_envs: int, num_agents=None) -> None:
    """Check ``args`` (already backend values, named by ``labels``) against what ``kernel``'s
    body indexes and writes (`kernelgym.core.extents`), before any launch."""
    access = extents.body_access(kernel)
    names = tuple(inspect.signature(kernel.py_func).parameters)[1 if kernel.kind == "env" else 3 :]
    arrays: dict[str, Any] = {}
    written: set[str] = set()
    for label, name, value in zip(labels, names, args):
        layout = access.layouts.get(name, None if access.known else "per_env")
        needed = extents.needed_shape(layout, num_envs, num_agents)
        for item in value if isinstance(value, tuple) else (value,):
            if isinstance(item, SCALAR_TYPES):
                continue
            writes = name in access.written or not access.known
            extents.check_array(label, item, needed, access.ndims.get(name, 0), writes)
            error = extents.read_only_error(label, item) if writes else None
            if error is not None:
                raise error
            arrays.setdefault(label, item)
            if writes or name in access.passed:
                written.add(label)
    if num_envs and num_agents != 0:  # a launch that runs nothing indexes nothing
        shapes = {
            name: tuple(value.shape)
            for name, value in zip(names, args)
            if hasattr(value, "shape") and not isinstance(value, type)
        }
        extents.check_bounds(access, shapes, dict(zip(names, labels)))
    extents.check_no_overlap(arrays, written)


class KernelTypingError(TypingError, TypeError):
    """Values a kernel body does not type-check with: a Numba ``TypingError`` (as before) and a
    ``TypeError`` whose message names the failing statement and the types of its values."""


def typing_error(title: str, error, names, labels, args) -> TypeError:
    """A TypeError for a Numba ``TypingError`` of a launch: the failing statement and the type of
    each parameter it uses (``names``, shown as ``labels``, bound to ``args``), not Numba's dump."""
    import numba

    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    reason = next((line for line in lines if not line.startswith("Failed in")), type(error).__name__)
    signature = next((line[3:].strip() for line in lines if line.startswith(">>>")), None)
    reason = reason if signature is None else f"{reason} {signature}"
    # Numba quotes the failing source line last, above a caret line
    statement = next(
        (line for line in reversed(lines) if not line.startswith(("^", "During", "File", "<", "def "))), ""
    )
    used = set(re.findall(r"[A-Za-z_]\w*", statement))
    chosen = [(label, value) for name, label, value in zip(names, labels, args) if name in used]

    def typed(value):
        try:
            return str(numba.typeof(value))
        except ValueError:
            return type(value).__name__

    described = ", ".join(f"{label}: {typed(value)}" for label, value in (chosen or zip(labels, args)))
    # errors that an overload raised on purpose (e.g. atomic_add's dtype refusal) say it best
    specific = [line.split(":", 1)[1].strip() for line in lines if line.startswith(("TypingError:", "TypeError:"))]
    return KernelTypingError(
        f"{title}: the values do not type-check in the kernel body at `{statement}` ({reason}); "
        f"the values it uses: {described}" + "".join(f"; {line}" for line in dict.fromkeys(specific))
    )


class _WriteOnceKernel:
    kind = ""
    __qualname__: str  # the body's, per instance (functools.update_wrapper)

    def __init__(self, fn):
        if not isinstance(getattr(fn, "__module__", None), str):
            # launchers are cached by module and name: exec() without __name__ in its globals leaves none
            raise TypeError(
                f"{type(self).__name__.lower()[:-6]}_kernel {getattr(fn, '__qualname__', fn)!r}: expected a function "
                f"with a module name (__module__), got __module__ {getattr(fn, '__module__', None)!r}; "
                f"define it in a module, or exec() it with globals that hold '__name__'"
            )
        functools.update_wrapper(self, fn)
        self.py_func = fn
        self.body = device_function(fn)
        self._key = codegen.body_key(fn)
        codegen.register_body(self._key, self.body)
        self._modules = {}  # argument count -> launcher module

    def __repr__(self):
        return f"<{type(self).__name__} {self.__qualname__}>"

    def __reduce__(self):
        # A module-level kernel pickles as a reference (workers import it); any other
        # is rebuilt from its Python function (with cloudpickle, for local functions).
        found = sys.modules.get(self.__module__)
        for part in self.__qualname__.split("."):
            found = getattr(found, part, None)
        if found is self:
            return self.__qualname__
        return (type(self), (self.py_func,))

    def _module(self, num_args: int):
        module = self._modules.get(num_args)
        if module is None:
            module = self._modules[num_args] = codegen.launcher_module(self.kind, self.py_func, self._key, num_args)
        return module

    def cpu_launcher(self, num_args: int):
        """The ``njit(parallel=True, cache=True)`` dispatcher for ``num_args`` arguments."""
        return self._module(num_args).cpu_launcher

    def cuda_launcher(self, num_args: int):
        """The ``cuda.jit`` dispatcher (the simulator's kernel in simulator processes)."""
        if not simulator_enabled():
            register_cuda_overloads()
        return self._module(num_args).cuda_launcher

    def _checked_args(self, backend: str, args: tuple) -> tuple:
        return tuple(kernel_argument(backend, f"argument {position}", value) for position, value in enumerate(args))

    def _typed_call(self, launcher, counts, args) -> None:
        try:
            launcher(*counts, *args)
        except TypingError as error:
            names = tuple(inspect.signature(self.py_func).parameters)[1 if self.kind == "env" else 3 :]
            labels = [f"argument {position} {name!r}" for position, name in enumerate(names)]
            raise typing_error(self.__qualname__, error, names, labels, args) from None

    def _check(self, num_envs, num_agents, args) -> None:
        names = tuple(inspect.signature(self.py_func).parameters)[1 if self.kind == "env" else 3 :]
        if len(args) != len(names):
            raise TypeError(f"{self.__qualname__}: expected {len(names)} arguments {names}, got {len(args)}")
        labels = [f"argument {position} {name!r}" for position, name in enumerate(names)]
        check_launch(self, labels, args, num_envs, num_agents)


class EnvKernel(_WriteOnceKernel):
    """A per-env body ``body(i, *args)`` run for ``i`` in ``range(num_envs)``."""

    kind = "env"

    def cpu(self, num_envs: int, *args) -> None:
        """Run the cpu build: a prange loop over the envs (arguments checked first)."""
        num_envs = check_count("num_envs", num_envs)
        self._check(num_envs, None, args)
        self._typed_call(self.cpu_launcher(len(args)), (num_envs,), args)

    def cuda(self, num_envs: int, *args) -> None:
        """Launch the CUDA kernel, one thread per env, on torch's current stream (asynchronous on a GPU)."""
        num_envs = check_count("num_envs", num_envs)
        self._check(num_envs, None, args)
        if num_envs == 0:
            return
        threads = min(ENV_THREADS_PER_BLOCK, num_envs)
        blocks = math.ceil(num_envs / threads)
        stream = streams.numba_stream(streams.current_stream())  # torch's current stream, now
        self.cuda_launcher(len(args))[blocks, threads, stream](num_envs, *args)

    def launch(self, backend: str | None, num_envs: int, *args) -> None:
        """Run the body for every env on ``backend`` ("cuda", "cpu", "sim", "auto" or None).

        Arguments are checked before anything runs: cpu takes numpy arrays (or CPU
        tensors), cuda and sim take device arrays, every backend takes scalars; arrays
        the body indexes by env need ``num_envs`` rows, written ones must be writable,
        not broadcast and not overlapping another argument (`kernelgym.core.extents`).
        """
        backend = resolve_backend(backend)
        num_envs = check_count("num_envs", num_envs)
        args = self._checked_args(backend, args)
        if backend == "cpu":
            self.cpu(num_envs, *args)
        else:
            self.cuda(num_envs, *args)


class AgentKernel(_WriteOnceKernel):
    """A per-agent body ``body(env, agent, num_agents, *args)``."""

    kind = "agent"

    def cpu(self, num_envs: int, num_agents: int, *args) -> None:
        """Run the cpu build: prange over envs, the agents of an env in order (arguments checked first)."""
        num_envs, num_agents = check_count("num_envs", num_envs), check_count("num_agents", num_agents)
        self._check(num_envs, num_agents, args)
        self._typed_call(self.cpu_launcher(len(args)), (num_envs, num_agents), args)

    def cuda(self, num_envs: int, num_agents: int, *args) -> None:
        """Launch one thread per agent, envs packed into blocks (`agent_grid`), on torch's current
        stream (asynchronous)."""
        num_envs, num_agents = check_count("num_envs", num_envs), check_count("num_agents", num_agents)
        self._check(num_envs, num_agents, args)
        if num_envs == 0 or num_agents == 0:
            return
        blocks, threads = agent_grid(num_envs, num_agents)
        stream = streams.numba_stream(streams.current_stream())
        self.cuda_launcher(len(args))[blocks, threads, stream](num_envs, num_agents, *args)

    def launch(self, backend: str | None, num_envs: int, num_agents: int, *args) -> None:
        """Run the body for every (env, agent) pair on ``backend``; see ``EnvKernel.launch``."""
        backend = resolve_backend(backend)
        num_envs = check_count("num_envs", num_envs)
        num_agents = check_count("num_agents", num_agents)
        args = self._checked_args(backend, args)
        if backend == "cpu":
            self.cpu(num_envs, num_agents, *args)
        else:
            self.cuda(num_envs, num_agents, *args)


def env_kernel(fn) -> EnvKernel:
    """Decorate a per-env body ``body(i, *args)`` (Numba subset) as a write-once kernel.

    Returns
    -------
    EnvKernel
        ``.launch(backend, num_envs, *args)``, ``.body`` (the ``njit(inline="always")``
        function), ``.cpu(num_envs, *args)``, ``.cuda(num_envs, *args)``.
    """
    return EnvKernel(fn)


def agent_kernel(fn) -> AgentKernel:
    """Decorate a per-agent body ``body(env, agent, num_agents, *args)`` as a write-once kernel.

    Returns
    -------
    AgentKernel
        ``.launch(backend, num_envs, num_agents, *args)``, ``.body``, ``.cpu``, ``.cuda``.
        Values several agents of an env write go through ``atomic_add``.
    """
    return AgentKernel(fn)
