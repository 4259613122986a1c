"""The PTX audit of ``kernelgym gpu-compile``: a default build rounds as the cpu twin does.

kernelgym's cuda launchers are compiled with NVVM's ``-fma=0`` (`kernelgym.core.contraction`),
so that every add, multiply, divide and square root rounds exactly as on the cpu. This module
checks the PTX that came out. A default build fails the audit on:

1. **a contracted fma.** The kernel's PTX has more ``fma``/``mad`` float instructions than the
   same NVVM input compiled again with ``-fma=0`` (the *reference*). libdevice's sin, cos, exp,
   log, pow... are linked into the kernel and evaluate their polynomials with explicit
   ``fma.rn`` (also ``fma.rm``/``fma.rz``), which ``-fma=0`` keeps: counting fmas alone would fail
   every kernel that calls one. Contraction only ever adds fmas, so "no more than the
   reference" holds exactly when NVVM fused none of the kernel's own ``a * b + c``. The
   reference is compiled only for a build whose PTX has any fma.
2. **a float add, sub or mul without ``.rn``.** Without an explicit rounding modifier ptxas
   may fuse it with a neighbour into an fma (``ptxas --fmad`` is on by default); NVVM writes
   ``.rn`` on every one of them under ``-fma=0``.
3. **an approximate or flush-to-zero instruction** (``.approx``, ``.ftz``), unless it is
   libdevice's own: a few libdevice functions seed a Newton iteration or a range reduction
   with one (``log`` and ``pow`` use ``rcp.approx.ftz.f64``, ``expf`` uses
   ``ex2.approx.ftz.f32``) and still meet NVIDIA's documented bound (`ULP_BOUNDS`). Such an
   opcode is allowed when one of the libdevice functions the kernel calls contains that very
   opcode when compiled alone (`libdevice_opcodes`, a tiny probe module through the same
   NVVM); it is then listed as a libdevice-internal use, never silently.

A launcher whose module name starts with
`kernelgym.core.contraction.CONTRACTED_MARKER` is an opt-in fast-math build (contraction
on): it is audited and reported, but never failed.

libdevice's transcendental functions are not the cpu's libm: a kernel that calls them gives
the same bits on cpu and sim (both call the platform's libm), and on a GPU only within the sum
of both libraries' ulp bounds. `libdevice_calls` names them for the report.
"""

from __future__ import annotations

import functools
import re

__all__ = [
    "ULP_BOUNDS",
    "approximate_opcodes",
    "audit_ptx",
    "fma_count",
    "libdevice_calls",
    "libdevice_opcodes",
    "ulp_bound",
]

# NVIDIA's documented maximum ulp error of libdevice's functions on the device: CUDA C++
# Programming Guide, "Mathematical Functions" > "Standard Functions", the tables
# "Single-Precision Mathematical Standard Library Functions with Maximum ULP Error" and
# "Double-Precision ..." (CUDA 12.x; "full range" unless noted). Keys are libdevice's names
# without ``__nv_`` (``sinf`` is the float32 sin). Operations exact by definition (min, max,
# abs, copysign, the floating-point class tests) are 0.
ULP_BOUNDS: dict[str, int] = {
    # float64
    "sqrt": 0,
    "rsqrt": 1,
    "cbrt": 1,
    "hypot": 2,
    "exp": 1,
    "exp2": 1,
    "exp10": 1,
    "expm1": 1,
    "log": 1,
    "log2": 1,
    "log10": 1,
    "log1p": 1,
    "sin": 2,
    "cos": 2,
    "tan": 2,
    "sincos": 2,
    "sinpi": 2,
    "cospi": 2,
    "asin": 2,
    "acos": 2,
    "atan": 2,
    "atan2": 2,
    "sinh": 2,
    "cosh": 1,
    "tanh": 1,
    "asinh": 3,
    "acosh": 3,
    "atanh": 2,
    "pow": 2,
    "erf": 2,
    "erfc": 5,
    "tgamma": 10,
    "fma": 0,
    "fmod": 0,
    "remainder": 0,
    "trunc": 0,
    "round": 0,
    "rint": 0,
    "nearbyint": 0,
    "ceil": 0,
    "floor": 0,
    "ldexp": 0,
    "frexp": 0,
    "fdim": 0,
    # float32
    "sqrtf": 0,
    "rsqrtf": 2,
    "cbrtf": 1,
    "hypotf": 3,
    "expf": 2,
    "exp2f": 2,
    "exp10f": 2,
    "expm1f": 1,
    "logf": 1,
    "log2f": 1,
    "log10f": 2,
    "log1pf": 1,
    "sinf": 2,
    "cosf": 2,
    "tanf": 4,
    "sincosf": 2,
    "sinpif": 1,
    "cospif": 1,
    "asinf": 2,
    "acosf": 2,
    "atanf": 2,
    "atan2f": 3,
    "sinhf": 3,
    "coshf": 2,
    "tanhf": 2,
    "asinhf": 3,
    "acoshf": 4,
    "atanhf": 3,
    "powf": 4,
    "erff": 2,
    "erfcf": 4,
    "tgammaf": 5,
    "fmaf": 0,
    "fmodf": 0,
    "remainderf": 0,
    "truncf": 0,
    "roundf": 0,
    "rintf": 0,
    "nearbyintf": 0,
    "ceilf": 0,
    "floorf": 0,
    "ldexpf": 0,
    "frexpf": 0,
    "fdimf": 0,
    # exact by definition (not in NVIDIA's tables)
    "fmin": 0,
    "fmax": 0,
    "fminf": 0,
    "fmaxf": 0,
    "fabs": 0,
    "fabsf": 0,
    "copysign": 0,
    "copysignf": 0,
    "isnand": 0,
    "isnanf": 0,
    "isinfd": 0,
    "isinff": 0,
    "isfinited": 0,
    "finitef": 0,
    "signbitd": 0,
    "signbitf": 0,
}

_INSTRUCTION = re.compile(r"^\s*(?:@!?%\w+\s+)?([a-z][\w.]*)\s")
_FLOAT_TYPES = frozenset({"f16", "f16x2", "bf16", "bf16x2", "f32", "f64"})
# float arithmetic that ptxas may fuse into an fma unless it carries an explicit rounding
_FUSIBLE = frozenset({"add", "sub", "mul"})
_FMA = frozenset({"fma", "mad"})
_APPROXIMATE = frozenset({"approx", "ftz"})
# `declare double @"__nv_sin"(double %".1")` in numba-cuda's NVVM input
_LIBDEVICE_DECLARATION = re.compile(r'^declare\s+(.+?)\s+@"?__nv_(\w+)"?\((.*)\)', re.MULTILINE)


def _float_instructions(ptx: str):
    """``(opcode parts, line)`` of each float-typed PTX instruction."""
    for line in ptx.splitlines():
        match = _INSTRUCTION.match(line)
        if match is None:
            continue
        parts = match.group(1).split(".")
        if parts[-1] in _FLOAT_TYPES:
            yield parts, " ".join(line.split())


def fma_count(ptx: str) -> int:
    """Number of float ``fma``/``mad`` instructions in ``ptx`` (any rounding)."""
    return sum(parts[0] in _FMA for parts, _ in _float_instructions(ptx))


def approximate_opcodes(ptx: str) -> frozenset:
    """The opcodes in ``ptx`` with an ``.approx`` or ``.ftz`` modifier (``rcp.approx.ftz.f64``)."""
    return frozenset(".".join(parts) for parts, _ in _float_instructions(ptx) if _APPROXIMATE & set(parts))


def audit_ptx(ptx: str, reference_fma: int | None = None, libdevice_approximate=frozenset()) -> tuple[str, ...]:
    """The audit's findings for one build's PTX (empty: it rounds as the cpu does).

    Parameters
    ----------
    ptx : str
        The build's PTX.
    reference_fma : int, optional
        `fma_count` of the same NVVM input compiled with ``-fma=0``; None skips the fma rule
        (a build without any fma needs no reference).
    libdevice_approximate : set of str
        Approximate opcodes that the kernel's libdevice functions contain themselves.

    Returns
    -------
    tuple of str
        One finding per rule broken, with the count and the first offending instruction.
    """
    unrounded, approximate, fmas = [], [], []
    for parts, line in _float_instructions(ptx):
        if parts[0] in _FMA:
            fmas.append(line)
        if parts[0] in _FUSIBLE and "rn" not in parts:
            unrounded.append(line)
        if _APPROXIMATE & set(parts) and ".".join(parts) not in libdevice_approximate:
            approximate.append(line)
    findings = []
    if reference_fma is not None and len(fmas) > reference_fma:
        findings.append(
            f"contracted fma: {len(fmas)} fma in this build, {reference_fma} in its -fma=0 "
            f"reference; first: `{fmas[0]}`"
        )
    if unrounded:
        findings.append(
            f"{len(unrounded)} float add/sub/mul without .rn (ptxas may fuse them into an fma); first: `{unrounded[0]}`"
        )
    if approximate:
        findings.append(
            f"{len(approximate)} approximate or flush-to-zero instruction(s) not from libdevice; "
            f"first: `{approximate[0]}`"
        )
    return tuple(findings)


def libdevice_calls(llvm_ir) -> tuple[str, ...]:
    """The libdevice functions (``__nv_*``, named without the prefix) that NVVM input declares.

    Parameters
    ----------
    llvm_ir : str, bytes or list of them
        The LLVM IR numba-cuda hands to NVVM (libdevice is linked in by NVVM, so its
        functions appear as declarations).
    """
    return tuple(sorted({name for _, name, _ in _declarations(llvm_ir)}))


def _declarations(llvm_ir) -> list[tuple[str, str, str]]:
    modules = [llvm_ir] if isinstance(llvm_ir, (str, bytes)) else list(llvm_ir)
    found = []
    for module in modules:
        text = module.decode() if isinstance(module, bytes) else module
        found += _LIBDEVICE_DECLARATION.findall(text)
    return found


def ulp_bound(name: str) -> str:
    """``"sin (2 ulp)"``: a libdevice function with NVIDIA's documented bound ("?" if none)."""
    bound = ULP_BOUNDS.get(name)
    return f"{name} ({'?' if bound is None else bound} ulp)"


_PROBE = """target triple = "nvptx64-nvidia-cuda"
target datalayout = "e-p:64:64:64-i1:8:8-i8:8:8-i16:16:16-i32:32:32-i64:64:64-i128:128:128-f32:32:32-f64:64:64-v16:16:16-v32:32:32-v64:64:64-v128:128:128-n16:32:64"
declare {result} @"__nv_{name}"({types})
define {result} @"kernelgym_probe"({params}) {{
{body}
}}
!nvvmir.version = !{{ !0 }}
!0 = !{{ i32 2, i32 0, i32 3, i32 2 }}
"""


def libdevice_opcodes(llvm_ir, arch: str) -> dict[str, frozenset]:
    """The approximate opcodes inside each libdevice function that ``llvm_ir`` calls.

    Each function is compiled alone (a probe that calls it) by NVVM with ``-fma=0`` for
    ``arch`` (``"compute_80"``); results are cached per declaration and arch.
    """
    return {name: _probe_opcodes(result, name, types, arch) for result, name, types in _declarations(llvm_ir)}


@functools.cache
def _probe_opcodes(result: str, name: str, arguments: str, arch: str) -> frozenset:
    from numba.cuda.cudadrv import nvvm

    # the declaration's parameters as types only: `double %".1", double %".2"` -> double, double
    types = [argument.strip().split(" %")[0] for argument in arguments.split(",") if argument.strip()]
    params = ", ".join(f"{kind} %a{index}" for index, kind in enumerate(types))
    call = f'call {result} @"__nv_{name}"({params})'
    body = f"  {call}\n  ret void" if result == "void" else f"  %r = {call}\n  ret {result} %r"
    ir = _PROBE.format(result=result, name=name, types=", ".join(types), params=params, body=body)
    ptx = nvvm.compile_ir([ir], fma=False, opt=3, arch=arch)
    return approximate_opcodes(bytes(ptx).decode().rstrip("\x00"))
