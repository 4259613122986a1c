"""FMA contraction off for kernelgym's cuda launchers (kernelgym.core.contraction).

NVVM fuses ``a * b + c`` into one ``fma.rn`` unless told ``-fma=0``; the cpu build rounds
twice. The gpu_compile-marked tests compile with NVIDIA's real NVVM (``tox -e gpu-compile``).
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from core_test_kernels import affine
from kernelgym.core import contraction, gpu_compile
from kernelgym.core.codegen import LAUNCHER_PACKAGE

_NAME_PART = st.text("abcdefghijklmnopqrstuvwxyz0123456789_", min_size=1, max_size=40)


def _definition(*parts: str) -> str:
    mangled = "".join(f"{len(part)}{part}" for part in parts)
    return f'define void @"_ZN{mangled}B2v1E5ArrayIdLi1E"(double* %x) {{\n  ret void\n}}\n'


@given(_NAME_PART, _NAME_PART)
def test_launcher_ir_gets_fma_off_unless_its_module_is_a_contracted_build(module, function):
    launcher = _definition(LAUNCHER_PACKAGE, module, function)
    expected = module.startswith(contraction.CONTRACTED_MARKER)
    assert contraction.nvvm_fma_option(launcher) is expected
    assert contraction.nvvm_fma_option([launcher.encode()]) is expected
    fast = _definition(LAUNCHER_PACKAGE, contraction.CONTRACTED_MARKER + module, function)
    assert contraction.nvvm_fma_option([launcher, fast]) is True


@given(_NAME_PART, _NAME_PART)
def test_ir_of_other_kernels_is_left_alone(module, function):
    # a user's own numba-cuda kernel, even one whose name mentions the package
    assert contraction.nvvm_fma_option(_definition("mymodule", module, function)) is None
    assert contraction.nvvm_fma_option(_definition("my" + LAUNCHER_PACKAGE, function)) is None
    assert contraction.nvvm_fma_option(f"declare double @{LAUNCHER_PACKAGE}(double)\n") is None


def _affine_ptx(cc):
    x = np.ones((3, 2))
    affine.launch("cpu", 3, x, np.zeros_like(x), 1.5, -2.0)
    module = affine._module(4)
    build_types = module.cpu_launcher.signatures[0]
    from numba import cuda

    from kernelgym.core.device_functions import register_cuda_overloads

    register_cuda_overloads()
    with gpu_compile._device_capability_answered_with(cc):
        ptx, _ = cuda.compile_ptx(module.cuda_launcher.py_func, build_types, cc=cc)
    return ptx


@pytest.mark.gpu_compile
@pytest.mark.parametrize("cc", gpu_compile.TARGETS, ids=gpu_compile.target_name)
def test_a_launcher_rounds_the_product_and_the_sum_separately(cc):
    gpu_compile.require_toolchain()
    ptx = _affine_ptx(cc)
    # x * scale + shift: NVVM's default would emit one fma.rn.f64 (one rounding)
    assert "fma.rn.f64" not in ptx
    assert "mul.rn.f64" in ptx and "add.rn.f64" in ptx


@pytest.mark.gpu_compile
def test_other_numba_cuda_kernels_keep_numba_cudas_default():
    gpu_compile.require_toolchain()
    from numba import cuda

    from kernelgym.core.device_functions import register_cuda_overloads

    register_cuda_overloads()  # installs the hook

    def user_affine(x, out, scale, shift):
        i = cuda.grid(1)
        if i < x.size:
            out[i] = x[i] * scale + shift

    array = "float64[::1]"
    ptx, _ = cuda.compile_ptx(user_affine, f"void({array}, {array}, float64, float64)", cc=(9, 0))
    assert "fma.rn.f64" in ptx


def test_every_launcher_is_built_without_link_time_optimization():
    # nvJitLink's LTO code generation contracts a * b + c past NVVM's -fma=0: on an H200
    # (CUDA 13) the affine launcher gave 5,410 of 30,000 values one ulp off the cpu while its
    # PTX held no fma. numba-cuda's @cuda.jit(lto=False) factory drops the option, so each
    # launcher is checked on the dispatcher numba-cuda builds it with.
    from kernelgym.core import bind

    x = np.ones((3, 2))
    affine.launch("cpu", 3, x, np.zeros_like(x), 1.5, -2.0)
    bind(affine, {"x": x, "out": np.zeros_like(x), "scale": 1.5, "shift": -2.0}, backend="cpu", num_envs=3)()
    launchers = gpu_compile.imported_launchers()
    assert any(name.split(".")[-1].startswith("program_") for name in launchers)
    for name, module in launchers.items():
        assert module.cuda_launcher.targetoptions["lto"] is False, name
