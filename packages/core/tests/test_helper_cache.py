"""A truncated ``.nbi``/``.nbc`` of Numba's own cache of kernelgym's ``njit(cache=True)`` helpers is
removed with a warning naming it and compiled again (issue 36, class 5), not an UnpicklingError."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

CALL = """
import warnings
warnings.simplefilter("always")
from kernelgym.core import portable_math
print(repr(portable_math.sin(0.5)))
"""


def _run(cache: Path) -> subprocess.CompletedProcess:
    environment = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    return subprocess.run([sys.executable, "-c", CALL], env=environment, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("suffix", [".nbi", ".nbc"])
def test_a_truncated_helper_cache_file_is_named_removed_and_rebuilt(tmp_path, suffix):
    first = _run(tmp_path)
    assert first.returncode == 0, first.stderr
    files = sorted(tmp_path.rglob(f"portable_math.sin*{suffix}"))
    assert files, sorted(tmp_path.rglob("*"))
    for path in files:
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    second = _run(tmp_path)
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout  # the same value, from a fresh compile
    assert "CacheWarning" in second.stderr and files[0].name in second.stderr
    assert "cannot be read" in second.stderr
    third = _run(tmp_path)  # rebuilt: read back without a warning
    assert third.returncode == 0 and "CacheWarning" not in third.stderr, third.stderr
