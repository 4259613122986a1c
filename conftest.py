"""Test configuration shared by every package's tests.

Kept free of kernelgym imports: each tox env installs only one package.
"""

import os

import pytest
from hypothesis import HealthCheck, settings

# Numba compiles on the first example, so wall-clock deadlines would only measure that.
settings.register_profile(
    "default",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "ci",
    deadline=None,
    max_examples=40,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "default"))

SIMULATOR_ON = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"


def _gpu_usable() -> bool:
    if SIMULATOR_ON:
        return False
    try:
        from numba import cuda

        return bool(cuda.is_available())
    except Exception:
        return False


def _gpu_compilers_missing() -> str | None:
    """Why NVIDIA's NVVM, NVRTC and ptxas cannot run in this process (or None): core's own probe."""
    try:
        from kernelgym.core.gpu_compile import toolchain_missing_reason
    except ImportError as error:  # an env without kernelgym-core (memory) has no GPU-compile tests
        return f"kernelgym-core is not importable ({error})"
    return toolchain_missing_reason()


def pytest_collection_modifyitems(config, items):
    # Simulator tests need NUMBA_ENABLE_CUDASIM=1 before numba is imported, so they run in
    # their own process (tox -e sim); a plain pytest run says where they went.
    needs_sim = pytest.mark.skip(reason="simulator test: run `tox -e sim` (sets NUMBA_ENABLE_CUDASIM=1)")
    needs_gpu = pytest.mark.skip(reason="no usable CUDA GPU on this machine")
    gpu = None
    compilers_missing = None
    for item in items:
        if "gpu_compile" in item.keywords:
            if compilers_missing is None:
                compilers_missing = _gpu_compilers_missing() or ""
            if compilers_missing:
                item.add_marker(
                    pytest.mark.skip(
                        reason=f"GPU-compile test: {compilers_missing}; run `tox -e gpu-compile` "
                        '(or pip install "kernelgym-core[gpu-compile]")'
                    )
                )
        if "sim" in item.keywords and not SIMULATOR_ON:
            item.add_marker(needs_sim)
        if "gpu" in item.keywords:
            gpu = _gpu_usable() if gpu is None else gpu
            if not gpu:
                item.add_marker(needs_gpu)
