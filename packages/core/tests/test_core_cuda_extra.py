"""The ``cuda`` extra: cpu runs without it, ``cuda`` and ``sim`` name it, ``auto`` says why it chose cpu.

Most tests run a fresh process in which the extra's modules cannot be found (a finder
placed first on ``sys.meta_path`` answers for them as for an uninstalled package), so they
check the messages wherever the suite runs. tox's ``nocuda`` env installs every package
without the extra and sets ``KERNELGYM_EXPECT_NO_CUDA_EXTRA=1``: there the absence is real,
and `test_the_extra_is_detected_as_installed_or_not` insists on it.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys

import pytest

from kernelgym.core import BackendUnavailableError, resolve_backend
from kernelgym.core.backends import CUDA_EXTRA_HINT, CUDA_EXTRA_MODULES, cuda_extra_missing

# Makes the `cuda` extra's modules unimportable in the process that runs it, as when the extra
# is not installed. Prepended to the scripts below.
WITHOUT_THE_EXTRA = f"""
import importlib.abc, sys

class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == module or name.startswith(module + ".") for module in {tuple(CUDA_EXTRA_MODULES)!r}):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, NotInstalled())
"""

RESOLVE_EACH = """
import logging
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="LOG %(message)s")
from kernelgym.core import BackendUnavailableError, resolve_backend

print("AUTO", resolve_backend("auto"))
for name in ("cuda", "sim"):
    try:
        print("RESOLVED", resolve_backend(name))
    except BackendUnavailableError as error:
        print("ERROR", error)
print("IMPORTED numba.cuda:", "numba.cuda" in sys.modules)
"""


def _run_without_the_extra(body: str, simulator: bool) -> list[str]:
    env = {key: value for key, value in os.environ.items() if key != "NUMBA_ENABLE_CUDASIM"}
    if simulator:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_THE_EXTRA + body], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


@pytest.mark.parametrize("simulator", [False, True], ids=["plain", "NUMBA_ENABLE_CUDASIM=1"])
def test_cuda_and_sim_name_the_extra_and_auto_says_why_it_chose_cpu(simulator):
    lines = _run_without_the_extra(RESOLVE_EACH, simulator)
    assert CUDA_EXTRA_HINT == 'pip install "kernelgym-core[cuda]"'
    reason = (
        "numba-cuda, cuda-bindings, cuda-core are not installed (the 'cuda' extra); "
        f"install it with `{CUDA_EXTRA_HINT}`"
    )
    # sim names the variable too when it is missing: everything to fix, in one message
    variable = (
        ""
        if simulator
        else "; and NUMBA_ENABLE_CUDASIM=1 is not set; set it in the environment before the process "
        "imports numba (e.g. `NUMBA_ENABLE_CUDASIM=1 python ...`)"
    )
    assert lines == [
        f"LOG backend 'auto' chose 'cpu': {reason}",
        "AUTO cpu",
        f"ERROR backend 'cuda' is unavailable: {reason}",
        f"ERROR backend 'sim' is unavailable: {reason}{variable}",
        # the checks import nothing of numba-cuda (numba's own deprecated numba.cuda included)
        "IMPORTED numba.cuda: False",
    ]


def test_only_what_is_missing_is_named():
    # numba-cuda installed --no-deps, say: the prebuilt launch's cuda-core is still missing
    body = """
from kernelgym.core.backends import cuda_extra_missing_reason
print(cuda_extra_missing_reason())
"""
    script = WITHOUT_THE_EXTRA.replace(repr(tuple(CUDA_EXTRA_MODULES)), repr(("cuda.core",))) + body
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    # in tox's nocuda env the other two are really missing as well
    named = [name for name in CUDA_EXTRA_MODULES.values() if name == "cuda-core" or not _installed(name)]
    verb = "is" if len(named) == 1 else "are"
    assert result.stdout.strip() == (
        f"{', '.join(named)} {verb} not installed (the 'cuda' extra); install it with `{CUDA_EXTRA_HINT}`"
    )


def test_the_cpu_backend_runs_a_kernel_without_the_extra():
    body = """
import numpy as np
from kernelgym.core import env_kernel

@env_kernel
def add_one(i, x):
    x[i] += 1.0

x = np.zeros(4)
add_one.launch("cpu", 4, x)
print(x.tolist(), "numba_cuda" in sys.modules, "numba.cuda" in sys.modules)
"""
    assert _run_without_the_extra(body, simulator=False)[-1] == "[1.0, 1.0, 1.0, 1.0] False False"


def _installed(distribution: str) -> bool:
    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def test_the_extra_is_detected_as_installed_or_not():
    not_installed = {name for name in CUDA_EXTRA_MODULES.values() if not _installed(name)}
    assert set(cuda_extra_missing()) == not_installed
    if os.environ.get("KERNELGYM_EXPECT_NO_CUDA_EXTRA") == "1":
        # tox's nocuda env: nothing of the extra came in through another package's dependencies
        assert not_installed == set(CUDA_EXTRA_MODULES.values())
        for name in ("cuda", "sim"):
            with pytest.raises(BackendUnavailableError, match=r"numba-cuda.*kernelgym-core\[cuda\]"):
                resolve_backend(name)


def test_the_gpu_compile_probe_names_the_missing_extra():
    # numba's own deprecated numba.cuda imports without numba-cuda: the probe must not stop at
    # that import, nor blame NVRTC for what is numba-cuda's absence
    body = """
from kernelgym.core.gpu_compile import toolchain_missing_reason
print(toolchain_missing_reason())
"""
    reason = _run_without_the_extra(body, simulator=False)[-1]
    assert reason == (
        "numba-cuda, cuda-bindings, cuda-core are not installed (the 'cuda' extra, which gpu-compile brings); "
        'pip install "kernelgym-core[gpu-compile]"'
    )
