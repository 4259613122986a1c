"""FunctionManager: kernels registered by name, launched with data-manager names.

```python
fm = FunctionManager(data_manager)
fm.register("step", step)                       # an env_kernel or agent_kernel
fm.register("legacy", legacy_cuda_kernel, cpu=legacy_cpu, layout="per_agent")
fm.launch("step", "obs", "actions", 0.5)        # names -> device data, meta, constants
step_all = fm.bind("step", "obs", "actions", 0.5)   # names resolved and checked once
step_all()
```

Launch layouts: ``per_env`` is one thread per env (blocks of
``kernels.ENV_THREADS_PER_BLOCK``); ``per_agent`` is one block per env and one thread
per agent (at most ``kernels.MAX_AGENT_THREADS``; more agents need an agent-strided loop).
"""

from __future__ import annotations

import inspect
import math
import warnings

from kernelgym.core import kernels
from kernelgym.core.backends import BackendUnavailableError, simulator_enabled
from kernelgym.core.binding import bind, parameter_names
from kernelgym.core.data_manager import CUDADataManager
from kernelgym.core.device_functions import register_cuda_overloads
from kernelgym.core.kernels import AgentKernel, EnvKernel
from kernelgym.core.streams import StreamLaunch

__all__ = ["FunctionManager", "LAYOUTS"]

LAYOUTS = ("per_env", "per_agent")


def _is_cuda_kernel(obj) -> bool:
    """Whether ``obj`` is a ``cuda.jit`` kernel (the simulator's, in simulator processes)."""
    if simulator_enabled():
        from numba.cuda.simulator.kernel import FakeCUDAKernel

        return isinstance(obj, FakeCUDAKernel)
    from numba.cuda.dispatcher import CUDADispatcher

    return isinstance(obj, CUDADispatcher)


class _Registered:
    def __init__(self, name, kernel, cpu, layout, num_args, run_in_simulator):
        self.name = name
        self.kernel = kernel
        self.cpu = cpu
        self.layout = layout
        self.num_args = num_args
        self.run_in_simulator = run_in_simulator


class FunctionManager:
    """Kernels registered by name and launched on the data manager's backend.

    Parameters
    ----------
    data_manager : CUDADataManager
        Provides the backend, ``num_envs``, ``num_agents`` and the data that string
        arguments name.
    """

    def __init__(self, data_manager: CUDADataManager):
        if not isinstance(data_manager, CUDADataManager):
            raise TypeError(f"data_manager: expected a CUDADataManager, got {type(data_manager).__name__}")
        if data_manager.num_envs is None:
            raise ValueError("data_manager: its num_envs is None; kernels are launched over num_envs envs")
        self.data_manager = data_manager
        self.backend = data_manager.backend
        self._functions: dict[str, _Registered] = {}

    def __contains__(self, name) -> bool:
        return name in self._functions

    @property
    def names(self) -> list:
        """The registered kernel names."""
        return list(self._functions)

    def register(self, name: str, kernel, cpu=None, *, layout: str | None = None, allow_simulator: bool = False):
        """Register a kernel under ``name``.

        Parameters
        ----------
        name : str
            Unique name.
        kernel : EnvKernel, AgentKernel or numba.cuda kernel
            A write-once kernel (layout ``per_env`` or ``per_agent`` follows from it), or
            a hand-written ``cuda.jit`` kernel.
        cpu : callable, optional
            For a hand-written kernel: its cpu counterpart, called as ``cpu(*args)`` with
            the same (numpy) arguments on the cpu backend.
        layout : {"per_env", "per_agent"}, optional
            The launch layout of a hand-written kernel (default ``per_env``).
        allow_simulator : bool
            On the cpu backend, run a hand-written kernel without a cpu counterpart in the
            CUDA simulator (only in a ``NUMBA_ENABLE_CUDASIM=1`` process; slow; warns).

        Returns
        -------
        kernel
            The kernel, so that ``register`` can be used as a decorator helper.
        """
        if not isinstance(name, str) or not name:
            raise TypeError(f"name: expected a non-empty str, got {type(name).__name__} {name!r}")
        if name in self._functions:
            raise ValueError(f"{name}: a kernel is already registered under this name")
        if layout not in (None, *LAYOUTS):
            raise ValueError(f"{name}: layout must be one of {LAYOUTS}, got {layout!r}")
        run_in_simulator = False
        if isinstance(kernel, (EnvKernel, AgentKernel)):
            inferred = "per_env" if isinstance(kernel, EnvKernel) else "per_agent"
            if layout not in (None, inferred):
                raise ValueError(f"{name}: an {type(kernel).__name__} launches {inferred}, got layout={layout!r}")
            if cpu is not None:
                raise ValueError(f"{name}: a write-once kernel builds its own cpu version; do not pass cpu")
            layout = inferred
            leading = 1 if layout == "per_env" else 3
            num_args = len(inspect.signature(kernel.py_func).parameters) - leading
        elif _is_cuda_kernel(kernel):
            layout = layout or "per_env"
            num_args = len(inspect.signature(kernel.py_func).parameters)
            if cpu is not None and not callable(cpu):
                raise TypeError(f"{name}: cpu must be callable, got {type(cpu).__name__}")
            if self.backend == "cpu" and cpu is None:
                if not allow_simulator:
                    raise ValueError(
                        f"{name}: a hand-written CUDA kernel needs a cpu counterpart on the cpu backend "
                        "(pass cpu=...), or allow_simulator=True in a NUMBA_ENABLE_CUDASIM=1 process"
                    )
                if not simulator_enabled():
                    raise BackendUnavailableError(
                        f"{name}: allow_simulator=True needs NUMBA_ENABLE_CUDASIM=1 set before numba is imported"
                    )
                warnings.warn(
                    f"{name}: no cpu counterpart; this kernel runs in the CUDA SIMULATOR on the cpu backend "
                    "(Python threads: orders of magnitude slower)",
                    RuntimeWarning,
                    stacklevel=2,
                )
                run_in_simulator = True
        else:
            raise TypeError(
                f"{name}: expected an env_kernel, an agent_kernel "
                f"or a numba.cuda.jit kernel, got {type(kernel).__name__}"
            )
        if layout == "per_agent" and self.data_manager.num_agents is None:
            raise ValueError(f"{name}: layout 'per_agent' needs the data manager's num_agents, which is None")
        if self.backend == "cuda":
            register_cuda_overloads()  # hand-written kernels may call atomic_add too
        self._functions[name] = _Registered(name, kernel, cpu, layout, num_args, run_in_simulator)
        return kernel

    def get_function(self, name: str):
        """The kernel registered under ``name``."""
        return self._registered(name).kernel

    def _registered(self, name) -> _Registered:
        try:
            return self._functions[name]
        except (KeyError, TypeError):
            raise KeyError(f"{name!r}: no kernel registered under this name; registered: {self.names}") from None

    def _resolve(self, registered: _Registered, args: tuple) -> tuple:
        if len(args) != registered.num_args:
            raise TypeError(f"{registered.name}: expects {registered.num_args} kernel arguments, got {len(args)}")
        return tuple(self.data_manager.kernel_argument(arg) if isinstance(arg, str) else arg for arg in args)

    def _layout(self, arg) -> str:
        """How a launch argument's leading dims relate to the launch (for the extent checks)."""
        if isinstance(arg, str) and arg in self.data_manager._data:
            layout = self.data_manager._data[arg].attributes.get("layout")
            if layout is not None:
                return layout
        return "shared"

    def bind(self, name: str, *args):
        """A no-argument callable that launches ``name`` with ``args`` resolved once.

        A write-once kernel is bound by `kernelgym.core.binding.bind`: the arguments
        fill its parameters in order, and data declared ``per_env``/``per_agent`` is
        checked to cover every env (and agent) once, here. Arguments stay valid across
        resets (resets are in place), so a bound launch can be reused for the whole run.
        """
        registered = self._registered(name)
        resolved = self._resolve(registered, args)
        num_envs = self.data_manager.num_envs
        num_agents = self.data_manager.num_agents
        kernel = registered.kernel
        backend = self.backend
        if isinstance(kernel, (EnvKernel, AgentKernel)):
            names = parameter_names(kernel)
            return bind(
                kernel,
                dict(zip(names, resolved)),
                backend=backend,
                num_envs=num_envs,
                num_agents=num_agents,
                layouts={n: self._layout(a) for n, a in zip(names, args)},
            )
        if backend == "cpu" and not registered.run_in_simulator:
            cpu = registered.cpu
            return lambda: cpu(*resolved)
        if registered.layout == "per_env":
            threads = min(kernels.ENV_THREADS_PER_BLOCK, num_envs)
            configuration = (math.ceil(num_envs / threads), threads)
        else:
            # a raw cuda kernel written to WarpDrive's convention (env = blockIdx.x,
            # agent = threadIdx.x): one block per env, unlike kernelgym's packed launchers
            configuration = (num_envs, min(kernels.MAX_AGENT_THREADS, num_agents))
        # on torch's current stream, read at each call; the simulator's kernel[grid, block]
        # configures the shared kernel object itself, so it is configured at each launch
        return StreamLaunch(kernel, *configuration, resolved, reconfigure=simulator_enabled())

    def launch(self, name: str, *args) -> None:
        """Launch kernel ``name`` over all envs; string arguments name data-manager data,
        meta info or shared constants, other arguments are passed as they are."""
        self.bind(name, *args)()
