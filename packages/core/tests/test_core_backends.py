"""resolve_backend: names, the environment variable and clear reasons for unavailable backends."""

import os
import subprocess
import sys

import pytest

from kernelgym.core import BackendUnavailableError, resolve_backend
from kernelgym.core.backends import gpu_usable, simulator_enabled


def test_cpu_is_always_available():
    assert resolve_backend("cpu") == "cpu"
    assert resolve_backend("  CPU ") == "cpu"


def test_auto_is_cuda_when_a_gpu_is_usable_else_cpu():
    assert resolve_backend("auto") == ("cuda" if gpu_usable() else "cpu")


def test_none_reads_the_environment_variable(monkeypatch):
    monkeypatch.setenv("KERNELGYM_BACKEND", "cpu")
    assert resolve_backend() == "cpu"
    monkeypatch.delenv("KERNELGYM_BACKEND")
    assert resolve_backend() == resolve_backend("auto")


def test_unknown_names_list_the_valid_ones(monkeypatch):
    with pytest.raises(ValueError, match=r"backend.*'cuda', 'cpu', 'sim', 'auto'.*'tpu'"):
        resolve_backend("tpu")
    monkeypatch.setenv("KERNELGYM_BACKEND", "gpu0")
    with pytest.raises(ValueError, match=r"KERNELGYM_BACKEND.*'gpu0'"):
        resolve_backend()
    with pytest.raises(TypeError, match="backend"):
        resolve_backend(3)


def test_cuda_without_a_gpu_says_why():
    if gpu_usable():
        assert resolve_backend("cuda") == "cuda"
        return
    with pytest.raises(BackendUnavailableError, match="backend 'cuda' is unavailable: .+"):
        resolve_backend("cuda")
    assert issubclass(BackendUnavailableError, RuntimeError)


def test_sim_needs_the_simulator_switched_on_before_import():
    if simulator_enabled():
        assert resolve_backend("sim") == "sim"
        return
    with pytest.raises(BackendUnavailableError, match="NUMBA_ENABLE_CUDASIM=1 is not set"):
        resolve_backend("sim")


def test_sim_switched_on_too_late_is_reported():
    script = (
        "import os, numba\n"
        "os.environ['NUMBA_ENABLE_CUDASIM'] = '1'\n"
        "from kernelgym.core import resolve_backend, BackendUnavailableError\n"
        "try:\n"
        "    resolve_backend('sim')\n"
        "except BackendUnavailableError as error:\n"
        "    print(error)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert "only after numba had been imported" in result.stdout, result.stderr


def test_import_neither_imports_torch_nor_compiles():
    script = (
        "import sys, kernelgym.core as core\n"
        "print('torch' in sys.modules, any(m.startswith('kernelgym_launchers') for m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.stdout.split() == ["False", "False"], result.stderr


@pytest.mark.sim
def test_sim_process_resolves_sim_and_refuses_cuda():
    assert resolve_backend("sim") == "sim"
    assert resolve_backend("auto") == "cpu"
    with pytest.raises(BackendUnavailableError, match="simulator"):
        resolve_backend("cuda")
