"""Compile kernels for NVIDIA GPUs on a machine without a GPU or driver.

NVIDIA's NVVM turns a kernel into PTX (``numba.cuda.compile_ptx``) and ``ptxas`` turns
the PTX into machine code for one GPU, reporting registers, stack and spills. Both come
as pip wheels (``pip install "kernelgym-core[gpu-compile]"``), so CI can compile every
kernel for the GPU on every commit. The CUDA simulator runs kernels as Python, which
accepts code that NVVM rejects; this module is the check that it does not.

```python
from kernelgym.core import gpu_compile

recorder = gpu_compile.LauncherRecorder()
with recorder.workload("my env"):
    ...                                   # run kernels on the cpu backend
builds = recorder.compile()               # every launcher, for sm_90a and sm_80
print(gpu_compile.format_table(builds))
```

Write-once kernels are generated launcher modules (see `kernelgym.core.codegen`),
each with a ``cpu_launcher`` (``njit``) and a ``cuda_launcher`` (``cuda.jit``). Numba
records the exact argument types of every cpu launch (`launched_signatures`);
compiling ``cuda_launcher`` for those types is compiling what a GPU launch would build.

Each build is also audited and checked for fit (no GPU needed either):

- the PTX audit (`kernelgym.core.ptx_audit`): a default build must round every add,
  multiply and fma as the cpu twin does; it lists the libdevice functions (sin, cos, exp...)
  the kernel calls, whose results are only within NVIDIA's documented ulp bounds of the cpu's;
- the launch fit (`kernelgym.core.launch_fit`): the launch kernelgym configures for the
  kernel (its threads per block at the cap) must fit sm_80 and sm_90; its occupancy is reported.

``python -m kernelgym.core.gpu_compile`` compiles core's own kernels (data-manager
resets and logs, RNG users, FunctionManager launches) and prints the table.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import inspect
import io
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
import types
from typing import Any

import numpy as np
from numba.core.types import StructRef

from kernelgym.core import codegen, ptx_audit, rng
from kernelgym.core.backends import cuda_extra_missing
from kernelgym.core.contraction import CONTRACTED_MARKER
from kernelgym.core.device_functions import atomic_add
from kernelgym.core.kernels import agent_kernel
from kernelgym.core.launch_fit import agent_block, configured_threads_per_block, launch_fit

__all__ = [
    "INSTALL_HINT",
    "all_launched_signatures",
    "LAUNCHER_PACKAGE",
    "TARGETS",
    "GpuCompileUnavailableError",
    "KernelBuild",
    "LauncherRecorder",
    "compile_kernel",
    "compile_kernel_for_targets",
    "extra_missing_reason",
    "launched_signatures",
    "typing_cpu_launches_only",
    "float64_share",
    "format_agent_packing",
    "format_step_launches",
    "format_table",
    "imported_launchers",
    "launcher_name",
    "ptxas_resources",
    "require_toolchain",
    "run_core_workloads",
    "target_name",
    "toolchain_missing_reason",
]

# sm_90a: what numba-cuda builds for an H100 (the "a" features of a 9.0 device);
# sm_80: the A100, WarpDrive's benchmark GPU.
TARGETS: tuple[tuple, ...] = ((9, 0, "a"), (8, 0))
INSTALL_HINT = 'pip install "kernelgym-core[gpu-compile]"'
LAUNCHER_PACKAGE = codegen.LAUNCHER_PACKAGE + "."

# PTX opcodes counted as floating-point arithmetic for `float64_share` (moves, loads,
# stores and conversions are not arithmetic).
_FLOAT_ARITHMETIC = frozenset(
    {
        "add",
        "sub",
        "mul",
        "mad",
        "fma",
        "div",
        "rcp",
        "sqrt",
        "rsqrt",
        "abs",
        "neg",
        "min",
        "max",
        "sin",
        "cos",
        "lg2",
        "ex2",
        "tanh",
        "setp",
        "testp",
        "copysign",
    }
)
_FLOAT_TYPES = {"f16": "f16", "f16x2": "f16", "bf16": "f16", "bf16x2": "f16", "f32": "f32", "f64": "f64"}
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
_INSTRUCTION = re.compile(r"^\s*(?:@!?%\w+\s+)?([a-z][\w.]*)\s")
# a launcher argument compiled in as a module global (kernelgym.core.codegen)
_CONSTANT = re.compile(r"a\d+")


class GpuCompileUnavailableError(RuntimeError):
    """NVIDIA's compilers cannot run in this process (the message says how to fix it)."""


@dataclasses.dataclass(frozen=True)
class KernelBuild:
    """One kernel compiled (or not) for one GPU target.

    Attributes
    ----------
    kernel : str
        The kernel's name: its bodies' qualified names, joined by ``+`` when fused.
    signature : str
        The argument types, as Numba writes them.
    target : str
        ``sm_90a``, ``sm_80``, ...
    origin : str
        The workload that first launched the kernel with these types.
    registers, stack_bytes, spill_store_bytes, spill_load_bytes : int or None
        ``ptxas -v``'s report (None when the compile failed).
    float64_share : float or None
        Fraction of the floating-point arithmetic PTX instructions that are ``.f64``
        (None: no floating-point arithmetic, or the compile failed).
    error : str or None
        What NVVM or ptxas said, when the kernel did not compile.
    seconds : float
        Time NVVM and ptxas took.
    kind : str or None
        ``"env"`` or ``"agent"``: how kernelgym launches it (None: not a launcher).
    shared_bytes : int or None
        Static shared memory per block (ptxas).
    libdevice : tuple of str
        The libdevice functions the kernel calls (``sin``, ``cosf``...; see `ptx_audit`).
    contracted : bool
        An opt-in fast-math build (contraction on): audited, never failed for it.
    fma : int or None
        fma instructions in the PTX.
    audit : tuple of str
        The PTX audit's findings (`ptx_audit.audit_ptx`); they fail a default build.
    libdevice_approximate : tuple of str
        Approximate instructions allowed as libdevice's own, with the function and its bound.
    threads_per_block : int or None
        The block size the fit and occupancy are for (the configured cap).
    occupancy : float or None
        Resident warps over the SM's warp slots at that block size.
    occupancy_limit : str or None
        What bounds the occupancy (``warps``, ``blocks``, ``registers``, ``shared memory``).
    registers_per_block : int or None
        With the per-warp register allocation unit.
    fit : tuple of str
        Why the configured launch does not fit the target (empty when it fits).
    """

    kernel: str
    signature: str
    target: str
    origin: str = ""
    registers: int | None = None
    stack_bytes: int | None = None
    spill_store_bytes: int | None = None
    spill_load_bytes: int | None = None
    float64_share: float | None = None
    error: str | None = None
    seconds: float = 0.0
    kind: str | None = None
    shared_bytes: int | None = None
    libdevice: tuple = ()
    contracted: bool = False
    fma: int | None = None
    audit: tuple = ()
    libdevice_approximate: tuple = ()
    threads_per_block: int | None = None
    occupancy: float | None = None
    occupancy_limit: str | None = None
    registers_per_block: int | None = None
    fit: tuple = ()

    @property
    def ok(self) -> bool:
        """It compiled."""
        return self.error is None

    @property
    def problems(self) -> tuple[str, ...]:
        """Everything that fails this build: a compile error, a default build's PTX audit
        findings, a configured launch that does not fit."""
        found: tuple[str, ...] = () if self.error is None else (self.error,)
        if not self.contracted:
            found += tuple(f"PTX audit: {finding}" for finding in self.audit)
        return found + tuple(
            f"launch fit ({self.threads_per_block} threads per block): {problem}" for problem in self.fit
        )

    @property
    def passed(self) -> bool:
        return not self.problems

    @classmethod
    def from_dict(cls, values: dict) -> KernelBuild:
        """A build from `dataclasses.asdict` output that went through JSON (lists back to tuples)."""
        fields: dict[str, Any] = {
            key: tuple(value) if isinstance(value, list) else value for key, value in values.items()
        }
        return cls(**fields)


# ------------------------------------------------------------------------------ toolchain
def _ptxas_path() -> str | None:
    try:
        from cuda.pathfinder import find_nvidia_binary_utility
    except ImportError:
        return None
    return find_nvidia_binary_utility("ptxas")


def extra_missing_reason() -> str | None:
    """What of the ``cuda`` extra (which gpu-compile brings) is not installed, or None.

    Imports nothing: a caller can tell before starting a process that compiling cannot run.
    """
    missing = cuda_extra_missing()
    if not missing:  # numba's own deprecated numba.cuda imports, but is not what this compiles with
        return None
    verb = "is" if len(missing) == 1 else "are"
    return f"{', '.join(missing)} {verb} not installed (the 'cuda' extra, which gpu-compile brings); {INSTALL_HINT}"


def toolchain_missing_reason() -> str | None:
    """Why kernels cannot be compiled for a GPU in this process, or None when they can."""
    import numba

    if numba.config.ENABLE_CUDASIM:
        return (
            "NUMBA_ENABLE_CUDASIM=1 was set before numba was imported, so numba.cuda is the "
            "CUDA simulator in this process; compile for the GPU in a process without it"
        )
    missing = extra_missing_reason()
    if missing is not None:
        return missing
    try:
        from numba.cuda.cudadrv import nvrtc, nvvm
    except ImportError as error:
        return f"numba-cuda is not installed ({error}); {INSTALL_HINT}"
    if not nvvm.is_available():
        return f"NVIDIA's NVVM library (libnvvm) was not found; {INSTALL_HINT}"
    try:
        nvrtc.get_supported_ccs()
    except Exception as error:
        return f"NVIDIA's NVRTC library could not be loaded ({error}); {INSTALL_HINT}"
    if _ptxas_path() is None:
        return f"NVIDIA's ptxas was not found (wheel nvidia-cuda-nvcc-cu12); {INSTALL_HINT}"
    return None


def require_toolchain() -> None:
    """Raise `GpuCompileUnavailableError` unless NVVM, NVRTC and ptxas can run here."""
    reason = toolchain_missing_reason()
    if reason is not None:
        raise GpuCompileUnavailableError(f"cannot compile kernels for the GPU: {reason}")


def target_name(cc: tuple) -> str:
    """``(9, 0, "a")`` -> ``"sm_90a"``."""
    return f"sm_{cc[0]}{cc[1]}{cc[2] if len(cc) > 2 else ''}"


@contextlib.contextmanager
def _device_capability_answered_with(cc: tuple):
    """Answer numba-cuda's "current device" lookup with the target capability.

    numba-cuda 0.30.4 compiles a device function that a kernel calls (a
    ``cuda.jit(device=True)`` function, or a CUDA ``@overload`` such as
    ``kernelgym.core.atomic_add``) for ``get_current_device().compute_capability``
    (``CUDADispatcher.compile_device`` in ``numba/cuda/dispatcher.py``), even when
    ``compile_ptx`` got ``cc=``. Without a GPU that lookup raises CudaSupportError; the
    capability being compiled for is the right answer, so give it for the duration.
    """
    from numba.cuda import dispatcher

    original = dispatcher.get_current_device
    dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=cc)
    try:
        yield
    finally:
        dispatcher.get_current_device = original


# ---------------------------------------------------------------------------- one kernel
def float64_share(ptx: str) -> float | None:
    """Fraction of floating-point arithmetic PTX instructions that are ``.f64``.

    Consumer GPUs run float64 at 1/64 of the float32 rate: this says how much of a
    kernel's arithmetic pays that price. None when the kernel does no float arithmetic.
    """
    counts = {"f16": 0, "f32": 0, "f64": 0}
    for line in ptx.splitlines():
        match = _INSTRUCTION.match(line)
        if match is None:
            continue
        parts = match.group(1).split(".")
        kind = _FLOAT_TYPES.get(parts[-1])
        if kind is not None and parts[0] in _FLOAT_ARITHMETIC:
            counts[kind] += 1
    total = sum(counts.values())
    return None if total == 0 else counts["f64"] / total


def ptxas_resources(ptx: str, cc: tuple) -> dict:
    """Assemble ``ptx`` for ``cc`` with ``ptxas -v``; its entry function's resources.

    Returns
    -------
    dict
        ``registers``, ``stack_bytes``, ``spill_store_bytes``, ``spill_load_bytes``,
        ``shared_bytes`` (static shared memory).

    Raises
    ------
    RuntimeError
        ptxas rejected the PTX (its message is included).
    """
    ptxas = _ptxas_path()
    if ptxas is None:
        raise GpuCompileUnavailableError(f"NVIDIA's ptxas was not found; {INSTALL_HINT}")
    with tempfile.TemporaryDirectory(prefix="kernelgym-ptxas-") as folder:
        source = os.path.join(folder, "kernel.ptx")
        with open(source, "w") as file:
            file.write(ptx)
        done = subprocess.run(
            [ptxas, "-v", f"--gpu-name={target_name(cc)}", source, "-o", os.path.join(folder, "kernel.cubin")],
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"ptxas --gpu-name={target_name(cc)} failed: {done.stderr.strip()}")
    return {**_entry_resources(done.stderr), "shared_bytes": _entry_shared_bytes(done.stderr)}


def _entry_shared_bytes(report: str) -> int:
    """``ptxas -v``'s static shared memory of the entry function (it omits ``smem`` when 0)."""
    entry = report.split("Compiling entry function", 1)[-1]
    shared = re.search(r"(\d+) bytes smem", entry)
    return 0 if shared is None else int(shared.group(1))


def _entry_resources(report: str) -> dict:
    """Parse ``ptxas -v``: the resources of the (single) entry function."""
    entry = report.split("Compiling entry function", 1)
    if len(entry) != 2:
        raise RuntimeError(f"ptxas -v reported no entry function:\n{report}")
    text = entry[1]
    frame = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", text)
    registers = re.search(r"Used (\d+) registers", text)
    if frame is None or registers is None:
        raise RuntimeError(f"ptxas -v: unexpected report:\n{report}")
    return {
        "registers": int(registers.group(1)),
        "stack_bytes": int(frame.group(1)),
        "spill_store_bytes": int(frame.group(2)),
        "spill_load_bytes": int(frame.group(3)),
    }


def compile_kernel(
    pyfunc,
    argtypes,
    cc: tuple = TARGETS[0],
    name: str | None = None,
    origin: str = "",
    nvvm_options: dict | None = None,
) -> KernelBuild:
    """Compile a kernel's Python function for one GPU target, as a CUDA launch would.

    The build is also audited (`ptx_audit`) and, for a kernelgym launcher, its configured
    launch is checked against the target's limits (`launch_fit`).

    Parameters
    ----------
    pyfunc : function
        The kernel's Python function (a ``cuda.jit`` dispatcher's ``py_func``).
    argtypes : tuple of numba types
        Its argument types (e.g. a cpu dispatcher's signature, or ``numba.typeof``
        of real arguments).
    cc : tuple
        Compute capability, e.g. ``(9, 0, "a")`` or ``(8, 0)``.
    name, origin : str, optional
        Labels for the report (default: the function's qualified name).
    nvvm_options : dict, optional
        NVVM options forced on this build (``{"fma": True}`` builds it contracted, to see
        what the audit says of such a build).

    Returns
    -------
    KernelBuild
        With ``error`` set (and no resources) when NVVM or ptxas rejected the kernel.

    Raises
    ------
    GpuCompileUnavailableError
        NVVM, NVRTC or ptxas are not installed, or the simulator is on.
    """
    return compile_kernel_for_targets(pyfunc, argtypes, (cc,), name, origin, nvvm_options)[0]


def compile_kernel_for_targets(
    pyfunc,
    argtypes,
    targets=TARGETS,
    name: str | None = None,
    origin: str = "",
    nvvm_options: dict | None = None,
) -> list[KernelBuild]:
    """`compile_kernel` for several targets, lowering the kernel once.

    Numba's typing and lowering to LLVM IR are most of a build (3-4 s of 3.5-4 s for
    CartPole's step); NVVM then turns that IR into each target's PTX. numba-cuda 0.30's
    lowering reads the compute capability only to pick the float64 atomic add (below 6.0)
    and the float32 fast tanh (7.5 and up), the same code for every target here (sm_80 and
    up), so the IR lowered for the first target is the IR of each: the PTX equals
    numba-cuda's own per-target build but for the kernel's mangled name, which encodes the
    first target's flags (``test_core_gpu_compile.py``). The first build's ``seconds``
    include the lowering.
    """
    require_toolchain()
    from kernelgym.core.device_functions import register_cuda_overloads

    register_cuda_overloads()  # before `_nvvm_inputs`: it installs the -fma=0 wrapper of NVVM's compile_ir
    targets = tuple(targets)
    label = name or f"{pyfunc.__module__}.{pyfunc.__qualname__}"
    signature = "(" + ", ".join(str(argtype) for argtype in argtypes) + ")"
    contracted = pyfunc.__module__.startswith(LAUNCHER_PACKAGE + CONTRACTED_MARKER)
    kind = _launcher_kind(pyfunc)
    started = time.perf_counter()
    builds = []
    library = None
    for cc in targets:
        target = target_name(cc)
        try:
            with _device_capability_answered_with(cc), _nvvm_inputs(nvvm_options) as inputs:
                if library is None:
                    library = _lowered(pyfunc, argtypes, cc)
                (ptx,) = library.get_asm_strs(cc=cc)
            resources = ptxas_resources(ptx, cc)
            if not inputs:
                raise RuntimeError("numba-cuda built the PTX without calling NVVM's compile_ir: nothing to audit")
            llvm_ir, options = inputs[-1]
            audit = _audit(ptx, llvm_ir, options, contracted=contracted)
        except GpuCompileUnavailableError:
            raise
        except Exception as error:
            # numba colours its messages for terminals; the report is plain text
            message = _ANSI_ESCAPE.sub("", f"{type(error).__name__}: {error}").strip()
            builds.append(
                KernelBuild(label, signature, target, origin, error=message, seconds=time.perf_counter() - started)
            )
        else:
            builds.append(
                KernelBuild(
                    label,
                    signature,
                    target,
                    origin,
                    float64_share=float64_share(ptx),
                    seconds=time.perf_counter() - started,
                    kind=kind,
                    contracted=contracted,
                    **resources,
                    **audit,
                    **_configured_fit(kind, target, resources),
                )
            )
        started = time.perf_counter()
    return builds


def _lowered(pyfunc, argtypes, cc: tuple):
    """The kernel typed and lowered to LLVM IR for ``cc`` (numba-cuda's code library, whose
    ``get_asm_strs(cc=...)`` asks NVVM for a target's PTX): what ``cuda.compile_ptx`` does
    before NVVM. Call it with `_device_capability_answered_with` ``cc``."""
    from numba.cuda import compiler as cuda_compiler

    from kernelgym.core.device_functions import register_cuda_overloads

    register_cuda_overloads()
    library, _ = cuda_compiler._compile_pyfunc_with_fixup(pyfunc, tuple(argtypes), device=False, abi="numba", cc=cc)
    return library


@contextlib.contextmanager
def _nvvm_inputs(forced: dict | None):
    """Record each ``(llvm_ir, options)`` numba-cuda hands to NVVM in the block (``forced``
    options added): the audit recompiles that input and reads its libdevice declarations."""
    from numba.cuda.cudadrv import nvvm

    inputs = []
    compile_ir = nvvm.compile_ir  # kernelgym.core.contraction's wrapper: it adds -fma=0 for launchers

    def recording(llvm_ir, **options):
        options.update(forced or {})
        inputs.append((llvm_ir, dict(options)))
        return compile_ir(llvm_ir, **options)

    nvvm.compile_ir = recording
    try:
        yield inputs
    finally:
        nvvm.compile_ir = compile_ir


def _nvvm_ptx(llvm_ir, options: dict) -> str:
    from numba.cuda.cudadrv import nvvm

    return bytes(nvvm.compile_ir(llvm_ir, **options)).decode().rstrip("\x00")


def _audit(ptx: str, llvm_ir, options: dict, contracted: bool) -> dict:
    """`KernelBuild`'s audit fields (the rules are in `kernelgym.core.ptx_audit`)."""
    calls = ptx_audit.libdevice_calls(llvm_ir)
    fmas = ptx_audit.fma_count(ptx)
    reference = None
    if fmas and not contracted:
        # the same NVVM input without contraction: libdevice's own fmas stay, fused ones go
        reference = ptx_audit.fma_count(_nvvm_ptx(llvm_ir, {**options, "fastmath": False, "fma": False}))
    approximate = ptx_audit.approximate_opcodes(ptx)
    inside = ptx_audit.libdevice_opcodes(llvm_ir, options["arch"]) if approximate and calls else {}
    internal = tuple(
        f"{opcode} in {', '.join(ptx_audit.ulp_bound(name) for name in sorted(inside) if opcode in inside[name])}"
        for opcode in sorted(approximate)
        if any(opcode in opcodes for opcodes in inside.values())
    )
    allowed = frozenset(opcode for opcode in approximate if any(opcode in opcodes for opcodes in inside.values()))
    return {
        "libdevice": calls,
        "fma": fmas,
        "audit": ptx_audit.audit_ptx(ptx, reference, allowed),
        "libdevice_approximate": internal,
    }


def _launcher_kind(pyfunc) -> str | None:
    """``"env"`` or ``"agent"`` for a generated launcher's cuda kernel, else None."""
    if not pyfunc.__module__.startswith(LAUNCHER_PACKAGE):
        return None
    parameters = list(inspect.signature(pyfunc).parameters)
    if parameters[:2] == ["num_envs", "num_agents"]:
        return "agent"
    return "env" if parameters[:1] == ["num_envs"] else None


def _configured_fit(kind: str | None, target: str, resources: dict) -> dict:
    """`KernelBuild`'s fit fields: the launch kernelgym configures for ``kind``, at its cap."""
    if kind is None:
        return {}
    threads = configured_threads_per_block(kind)
    fit = launch_fit(target, resources["registers"], threads, resources["shared_bytes"])
    return {
        "threads_per_block": threads,
        "occupancy": fit.occupancy,
        "occupancy_limit": fit.limited_by,
        "registers_per_block": fit.registers_per_block,
        "fit": fit.problems,
    }


# ------------------------------------------------------------------ generated launchers
def imported_launchers() -> dict[str, types.ModuleType]:
    """Every generated launcher module imported in this process, by module name."""
    return {
        name: module
        for name, module in list(sys.modules.items())
        if name.startswith(LAUNCHER_PACKAGE) and hasattr(module, "cpu_launcher") and hasattr(module, "cuda_launcher")
    }


def launcher_name(module: types.ModuleType) -> str:
    """A launcher's kernel name: the qualified names of the bodies it calls, ``+``-joined, and
    the float types it binds as constants (an env's ``real``: its precision) in brackets."""
    bodies = [
        value.py_func
        for key, value in sorted(vars(module).items())
        if key.startswith("body") and hasattr(value, "py_func")
    ]
    if not bodies:
        return module.__name__[len(LAUNCHER_PACKAGE) :]
    name = " + ".join(f"{_short_module(body.__module__)}.{body.__qualname__}" for body in bodies)
    precisions = sorted(
        {
            value.__name__
            for key, value in vars(module).items()
            if _CONSTANT.fullmatch(key) and isinstance(value, type) and issubclass(value, np.floating)
        }
    )
    return name + "".join(f" [{precision}]" for precision in precisions)


def _short_module(module: str) -> str:
    return module.removeprefix("kernelgym.")


def launched_signatures(module) -> list[tuple]:
    """The argument types a launcher module's cpu launches were called with, as its cuda
    launcher takes them (a program's small launches run its serial twin; a program's cpu
    launchers take their bound arrays packed in one struct, the cuda one each in turn),
    compiled or only typed (`typing_cpu_launches_only`)."""
    launchers = (module.cpu_launcher, getattr(module, "cpu_serial_launcher", None))
    compiled = [
        _unpacked(signature) for launcher in launchers if launcher is not None for signature in launcher.signatures
    ]
    typed = sorted((argtypes for name, argtypes in _TYPED_ONLY if name == module.__name__), key=str)
    return list(dict.fromkeys([*compiled, *typed]))


def _unpacked(signature) -> tuple:
    return tuple(
        member
        for argtype in signature
        for member in (argtype.field_dict.values() if isinstance(argtype, StructRef) else (argtype,))
    )


# (launcher module name, argument types) of cpu launches that only recorded their types
# (`typing_cpu_launches_only`)
_TYPED_ONLY: set[tuple[str, tuple]] = set()
_CPU_LAUNCHERS = ("cpu_launcher", "cpu_serial_launcher")


def all_launched_signatures() -> set[tuple[str, tuple]]:
    """``(launcher module name, argument types)`` of every cpu launch of this process, compiled or
    only typed: what `LauncherRecorder.compile` compiles (empty in a fresh process)."""
    return {
        (name, signature) for name, module in imported_launchers().items() for signature in launched_signatures(module)
    }


def _do_nothing(*args) -> None:
    return None


def _packed_without_compiling(module, bind, argtypes):
    """What ``module.cpu_bind`` returns, for launches that only record their types: an
    uncompiled stand-in whose numba type is the struct the compiled ``cpu_bind`` returns (its
    parameters are the struct's fields, each of its argument's type)."""
    fields = bind.__code__.co_varnames[: bind.__code__.co_argcount]
    struct = module.BoundArgumentsType(list(zip(fields, argtypes)))

    def pack(*args):
        packed = object.__new__(module.BoundArguments)
        packed._numba_type_ = struct  # what numba's dispatcher types a launch argument by
        return packed

    return pack


@contextlib.contextmanager
def typing_cpu_launches_only():
    """Inside the block, a generated launcher's cpu launch (``cpu_launcher`` or
    ``cpu_serial_launcher``) that would compile records its argument types for
    `LauncherRecorder.compile` and runs nothing; its ``cpu_bind`` (which packs the launch's
    bound arrays in one struct) returns a stand-in typed as the struct, compiled neither;
    every other numba function compiles and runs.

    Compiling the cpu launchers only to learn their argument types cost ``kernelgym
    gpu-compile`` 40% of its time (435 of 1,089 s), the ``cpu_bind`` functions another 16%;
    the types are what numba's dispatcher computes before it compiles (``typeof_pyval`` of
    each argument), so they are the same. The cpu results are then zeros and what the arrays
    held: a workload must not need them.
    """
    from numba.core.registry import CPUDispatcher

    compile_for_real = CPUDispatcher.compile

    def compile_or_record(dispatcher, signature):
        function = dispatcher.py_func
        if not function.__module__.startswith(LAUNCHER_PACKAGE):
            return compile_for_real(dispatcher, signature)
        argtypes = signature.args if hasattr(signature, "args") else tuple(signature)
        if function.__name__ == "cpu_bind":
            return _packed_without_compiling(sys.modules[function.__module__], function, argtypes)
        if function.__name__ not in _CPU_LAUNCHERS:
            return compile_for_real(dispatcher, signature)
        _TYPED_ONLY.add((function.__module__, _unpacked(argtypes)))
        return _do_nothing

    CPUDispatcher.compile = compile_or_record
    try:
        yield
    finally:
        CPUDispatcher.compile = compile_for_real


class LauncherRecorder:
    """Remembers which workload first launched each launcher with each argument types.

    Run workloads on the ``cpu`` backend inside `workload`; `compile` then
    compiles every launcher signature launched in this process (recorded or not) for
    the GPU targets.

    Parameters
    ----------
    run_on_cpu : bool
        Whether the launches inside a workload compile and run on the cpu too. Default
        False: a launch that would compile only records its argument types
        (`typing_cpu_launches_only`), which is all `compile` needs, in a fraction of the time.
    """

    def __init__(self, run_on_cpu: bool = False):
        self.run_on_cpu = run_on_cpu
        self.origins: dict[tuple[str, tuple], str] = {}
        self.failures: list[tuple[str, str]] = []
        self.steps: dict[str, tuple[int, tuple[tuple[int, int], ...]]] = {}

    def record_step(self, label: str, bound) -> None:
        """Note one env step's launches: ``bound`` is its `kernelgym.core.binding.BoundLaunch`
        (bound on cpu: the same arguments a cuda binding passes), kept as its phase programs and
        (arguments, parameter bytes) per launch for `format_step_launches`."""
        import numba

        from kernelgym.core.prebuilt_launch import parameter_bytes

        self.steps[label] = (
            bound.programs,
            tuple(
                (
                    len(values := (*record.arguments, *record.per_call)),
                    sum(parameter_bytes(numba.typeof(value)) for value in values),
                )
                for record in bound.records
            ),
        )

    @contextlib.contextmanager
    def workload(self, label: str, keep_going: bool = False):
        """Label the launches made inside the block; with ``keep_going``, record a
        workload that raises as a failure instead of raising."""
        before = all_launched_signatures()
        try:
            with contextlib.nullcontext() if self.run_on_cpu else typing_cpu_launches_only():
                yield
        except Exception:
            if not keep_going:
                raise
            self.failures.append((label, traceback.format_exc()))
        for key in sorted(all_launched_signatures() - before):
            self.origins.setdefault(key, label)

    def compile(self, targets=TARGETS, progress=None, recorded_only: bool = False) -> list[KernelBuild]:
        """Compile every launched launcher signature for every target.

        Parameters
        ----------
        targets : iterable of tuple
            Compute capabilities (default `TARGETS`: sm_90a and sm_80).
        progress : callable, optional
            Called with each `KernelBuild` as it completes.
        recorded_only : bool
            Only the signatures first launched inside this recorder's workloads (`origins`),
            not every launch of the process (a test process launched many others before).
        """
        require_toolchain()
        launchers = imported_launchers()
        builds = []
        keys = set(self.origins) if recorded_only else all_launched_signatures()
        # by kernel name, so that the table reads like an index
        for key in sorted(keys, key=lambda key: (launcher_name(launchers[key[0]]), str(key[1]))):
            module_name, argtypes = key
            module = launchers[module_name]
            for build in compile_kernel_for_targets(
                module.cuda_launcher.py_func,
                argtypes,
                targets,
                name=launcher_name(module),
                origin=self.origins.get(key, "(before recording)"),
            ):
                builds.append(build)
                if progress is not None:
                    progress(build)
        return builds


# ---------------------------------------------------------------------------- the table
def format_step_launches(steps: dict) -> str:
    """A markdown table: per env step, its phase programs (one launch each before fusion), its
    kernel launches, and each launch's arguments and kernel-parameter bytes (what the driver
    copies per launch; `LauncherRecorder.record_step`)."""
    lines = [
        "| env step | phases | launches | arguments per launch | parameter bytes per launch |",
        "|---|---:|---:|---|---|",
    ]
    for label, (phases, launches) in steps.items():
        arguments = ", ".join(str(count) for count, _ in launches)
        sizes = ", ".join(f"{size:,}" for _, size in launches)
        lines.append(f"| {label} | {phases} | {len(launches)} | {arguments} | {sizes} |")
    return "\n".join(lines)


def format_table(builds) -> str:
    """A markdown table: kernel, target, registers, stack, spills, float64 share, PTX audit,
    libdevice calls (with NVIDIA's ulp bounds), occupancy at the configured block, origin."""
    header = (
        "| kernel | target | registers | stack (B) | spills st/ld (B) | float64 share | PTX audit | "
        "libdevice (max ulp) | occupancy | first launched by |"
    )
    rows = [header, "|---|---|---:|---:|---:|---:|---|---|---|---|"]
    variants: dict[str, list[str]] = {}
    for build in builds:
        seen = variants.setdefault(build.kernel, [])
        if build.signature not in seen:
            seen.append(build.signature)
    for build in builds:
        name = build.kernel
        if len(variants[name]) > 1:
            name += f" [types {variants[name].index(build.signature) + 1}/{len(variants[name])}]"
        if build.ok:
            share = "-" if build.float64_share is None else f"{build.float64_share:.0%}"
            libdevice = ", ".join(ptx_audit.ulp_bound(call) for call in build.libdevice) or "-"
            rows.append(
                f"| {name} | {build.target} | {build.registers} | {build.stack_bytes} | "
                f"{build.spill_store_bytes}/{build.spill_load_bytes} | {share} | {_audit_cell(build)} | "
                f"{libdevice} | {_occupancy_cell(build)} | {build.origin} |"
            )
        else:
            first_line = build.error.splitlines()[0][:120]
            rows.append(f"| {name} | {build.target} | FAILED: {first_line} | | | | | | | {build.origin} |")
    return "\n".join(rows)


# agent counts the packing table shows: a few agents, Tag's default 11 (1 tagger, 10 runners), many
PACKING_AGENT_COUNTS = (4, 11, 100, 1000)


def busy_lanes(build: KernelBuild, threads_per_block: int, busy_threads_per_block: int) -> float:
    """The share of an SM's thread slots running an agent, with ``build``'s registers and shared
    memory, at resident blocks of ``threads_per_block`` threads of which ``busy_threads_per_block`` work."""
    fit = launch_fit(build.target, build.registers or 0, threads_per_block, build.shared_bytes or 0)
    return fit.active_blocks * busy_threads_per_block / (fit.max_warps * 32)


def format_agent_packing(builds, agent_counts=PACKING_AGENT_COUNTS) -> str:
    """A markdown table: for each agent kernel, the share of an SM's thread slots that run an agent
    with one env per block (``min(num_agents, cap)`` threads, the launch before issue 26) and with
    kernelgym's launch, which packs whole envs into blocks of up to the cap (`launch_fit.agent_block`)."""
    cap = configured_threads_per_block("agent")
    rows = [
        "| kernel | target | " + " | ".join(f"{count} agents" for count in agent_counts) + " |",
        "|---|---|" + "---|" * len(agent_counts),
    ]
    for build in builds:
        if build.kind != "agent" or not build.ok or build.fit:
            continue
        cells = []
        for count in agent_counts:
            envs_per_block, per_env = agent_block(count, cap)
            before = busy_lanes(build, per_env, per_env)
            after = busy_lanes(build, envs_per_block * per_env, envs_per_block * per_env)
            cells.append(f"{before:.0%} -> {after:.0%} ({envs_per_block} per block)")
        rows.append(f"| {build.kernel} | {build.target} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _audit_cell(build: KernelBuild) -> str:
    if build.contracted:
        return f"fast-math build (opt-in, {build.fma} fma)"
    if build.audit:
        return "FAILED: " + "; ".join(finding.split(";")[0] for finding in build.audit)
    if build.libdevice_approximate:
        return "ok; libdevice-internal " + "; ".join(build.libdevice_approximate)
    return "ok"


def _occupancy_cell(build: KernelBuild) -> str:
    if build.threads_per_block is None:
        return "-"
    if build.fit:
        return f"DOES NOT FIT at {build.threads_per_block} threads"
    return f"{build.occupancy:.0%} at {build.threads_per_block} threads ({build.occupancy_limit})"


def format_failures(builds, workload_failures=()) -> str:
    """Every kernel that did not compile, failed the PTX audit or does not fit its launch,
    and every workload that raised, in full."""
    parts = [
        f"{build.kernel} for {build.target} {build.signature}:\n" + "\n".join(build.problems)
        for build in builds
        if build.problems
    ]
    parts += [f"workload {label} raised:\n{trace}" for label, trace in workload_failures]
    return "\n\n".join(parts)


# ------------------------------------------------------------------ core's own kernels
@agent_kernel
def _agents_share_a_counter(env, agent, num_agents, counts, rng_states, noise, bump):
    """Agents of one env add to one counter (atomic on the GPU); agent 0 draws noise."""
    atomic_add(counts, env, bump)
    if agent == 0:
        noise[env] = rng.normal(rng_states, env) + rng.randint(rng_states, env, 3)


def run_core_workloads(recorder: LauncherRecorder, keep_going: bool = False) -> None:
    """Run core's kernels on the ``cpu`` backend under ``recorder``: the demo's RNG walk
    through a FunctionManager binding, ``reset_done_envs`` and ``log_step`` on several
    dtypes and dims, and an agent kernel using ``atomic_add`` and the RNG."""

    from kernelgym.core import CUDADataManager, DataFeed, FunctionManager, demo, rng

    with recorder.workload("core demo (FunctionManager.bind, rng, reset_done_envs)", keep_going):
        with contextlib.redirect_stdout(io.StringIO()):
            demo.main(["--backend", "cpu", "--num-envs", "4", "--steps", "2"])

    with recorder.workload("core data manager (log_step, reset_done_envs, agent kernel)", keep_going):
        num_envs, num_agents = 4, 3
        manager = CUDADataManager(num_agents=num_agents, num_envs=num_envs, episode_length=5, backend="cpu")
        feed = DataFeed()
        feed.add_data(
            "position",
            np.zeros((num_envs, num_agents, 2)),
            save_copy_and_apply_at_reset=True,
            log_data_across_episode=True,
        )
        feed.add_data(
            "flags", np.zeros(num_envs, np.bool_), save_copy_and_apply_at_reset=True, log_data_across_episode=True
        )
        feed.add_data("counts", np.zeros(num_envs, np.float32))
        feed.add_data("noise", np.zeros(num_envs))
        feed.add_data("rng_states", rng.seed_streams(0, num_envs))
        manager.push_data_to_device(feed)
        manager.add_meta_info({"bump": np.float32(1.0)})
        functions = FunctionManager(manager)
        functions.register("share", _agents_share_a_counter)
        functions.launch("share", "counts", "rng_states", "noise", "bump")
        manager.log_step()
        manager.reset_done_envs()


def main(argv=None) -> int:
    """``python -m kernelgym.core.gpu_compile``: compile core's kernels for the GPU, print the table."""
    parser = argparse.ArgumentParser(description="Compile kernelgym.core's kernels for sm_90a and sm_80.")
    parser.parse_args(argv)
    try:
        require_toolchain()
    except GpuCompileUnavailableError as error:
        print(error, file=sys.stderr)
        return 2
    recorder = LauncherRecorder()
    run_core_workloads(recorder, keep_going=True)
    builds = recorder.compile()
    print(format_table(builds))
    failures = format_failures(builds, recorder.failures)
    if failures:
        print(failures, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    # the module's own copy, not this __main__ one: its kernel keeps its importable name
    from kernelgym.core.gpu_compile import main as module_main

    raise SystemExit(module_main())
