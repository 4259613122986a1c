"""FMA contraction off for kernelgym's cuda launchers: the same bits as the cpu twin.

NVIDIA's NVVM fuses ``a * b + c`` into one ``fma.rn`` (one rounding) unless it is given
``-fma=0``; numba's cpu build rounds the product and the sum separately. With contraction
on, a GPU step differs from the cpu step in the last bit of many values, and an exact
cpu-vs-reference check says nothing about the GPU. So kernelgym compiles its own launchers
(the generated modules of `kernelgym.core.codegen`) with ``-fma=0``: NVVM then emits
``mul.rn`` and ``add.rn``, which ptxas may not fuse either (an explicit rounding modifier
forbids it), and every add, multiply, divide and square root rounds exactly as on the cpu.

numba-cuda 0.30.4 has no ``cuda.jit`` option for NVVM's ``-fma`` (numba-cuda issue #118;
pull request #839 adds ``fma=`` and is not released). Until it is, `install` wraps
``numba.cuda.cudadrv.nvvm.compile_ir``, the one function through which numba-cuda hands
LLVM IR to NVVM, and adds ``fma`` for IR that defines a kernelgym launcher (its mangled
name holds the launcher package, ``kernelgym_launchers``). Other numba-cuda kernels in the
process are left exactly as numba-cuda builds them. A launcher whose generated module name
starts with `CONTRACTED_MARKER` is an opt-in fast-math build: it gets ``-fma=1``.
Launchers are built with ``lto=False``: nvJitLink's link-time code generation has an
``-fma`` option of its own (default on) that this hook does not reach.
"""

from __future__ import annotations

import functools
import re

from kernelgym.core.codegen import LAUNCHER_PACKAGE

__all__ = ["CONTRACTED_MARKER", "install", "nvvm_fma_option"]

# how a launcher module's name starts when it is compiled with contraction ON (fast-math)
CONTRACTED_MARKER = "contracted_"
# Itanium mangling writes each part of a qualified name as its length, then the part:
# _ZN19kernelgym_launchers37env_affine_4_...13cuda_launcher...
_LAUNCHER_DEFINITION = re.compile(rf"define[^@\n]*@\"?_Z\w*?{len(LAUNCHER_PACKAGE)}{LAUNCHER_PACKAGE}(\d+)(\w+)")


def nvvm_fma_option(llvm_ir) -> bool | None:
    """NVVM's ``fma`` option for this IR: False for a kernelgym launcher, True for a
    contracted (fast-math) one, None for IR that defines no kernelgym launcher."""
    modules = [llvm_ir] if isinstance(llvm_ir, (str, bytes)) else list(llvm_ir)
    launcher_modules = []
    for module in modules:
        text = module.decode() if isinstance(module, bytes) else module
        launcher_modules += [rest[: int(length)] for length, rest in _LAUNCHER_DEFINITION.findall(text)]
    if not launcher_modules:
        return None
    return any(name.startswith(CONTRACTED_MARKER) for name in launcher_modules)


_installed = False


def install() -> None:
    """Wrap numba-cuda's NVVM entry point once per process (see the module docstring)."""
    global _installed
    if _installed:
        return
    from numba.cuda.cudadrv import nvvm

    original = nvvm.compile_ir

    @functools.wraps(original)
    def compile_ir(llvmir, **options):
        if "fma" not in options and not options.get("fastmath"):
            fma = nvvm_fma_option(llvmir)
            if fma is not None:
                options["fma"] = fma
        return original(llvmir, **options)

    nvvm.compile_ir = compile_ir
    _installed = True
