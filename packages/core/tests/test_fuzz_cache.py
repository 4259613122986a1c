"""Issue 25 fuzz: a damaged compile cache is rebuilt, with a warning naming its folder.

A clean process fills a cache (KERNELGYM_CACHE_DIR and NUMBA_CACHE_DIR) by launching a
tiny kernel; each example then damages some of its files (truncate, flip a byte, delete,
empty, replace by a folder) in a copy and launches again in a new process: the result
must equal the clean run's, and a damaged (not deleted) file must be named in a
CacheWarning together with its folder. Few examples: each costs a process start.
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from kernelgym.core import disk_cache

TESTS = Path(__file__).parent

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    from core_test_kernels import affine

    x = np.arange(12.0).reshape(6, 2)
    out = np.zeros((6, 2))
    affine.launch("cpu", 6, x, out, 1.5, -0.25)
    stats = affine.cpu_launcher(4).stats
    print(json.dumps({"out": out.tolist(), "hits": sum(stats.cache_hits.values())}))
    """
)

DAMAGES = ("truncate", "flip", "delete", "empty", "folder")


def run(root: Path) -> subprocess.CompletedProcess:
    env = dict(
        os.environ,
        KERNELGYM_CACHE_DIR=str(root / "kg"),
        NUMBA_CACHE_DIR=str(root / "numba"),
        PYTHONWARNINGS="always::UserWarning",
    )
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, str(TESTS)], capture_output=True, text=True, env=env, timeout=300
    )


def output(result: subprocess.CompletedProcess) -> dict:
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def clean_cache(tmp_path_factory):
    """The folder the examples run in (Numba names its cache folders after the launchers'
    absolute folder, so every run uses this one), a copy of its clean cache, the clean
    result and the cache's files."""
    root = tmp_path_factory.mktemp("fuzz") / "cache"
    first = output(run(root))
    files = sorted(path.relative_to(root) for path in root.rglob("*") if path.is_file())
    assert any(path.suffix == ".nbc" for path in files) and any(path.suffix == ".nbi" for path in files)
    snapshot = root.with_name("clean")
    shutil.copytree(root, snapshot)  # copy2: time stamps kept, which Numba's index checks
    return root, snapshot, first, files


def damage(path: Path, how: str, where: float, bits: int) -> None:
    data = path.read_bytes()
    if how == "truncate":
        path.write_bytes(data[: int(where * len(data))])
    elif how == "flip":
        position = min(int(where * len(data)), len(data) - 1)
        path.write_bytes(data[:position] + bytes([data[position] ^ bits]) + data[position + 1 :])
    elif how == "empty":
        path.write_bytes(b"")
    else:
        path.unlink()
        if how == "folder":
            path.mkdir()
            (path / "inside").write_text("not a cache file")


# no shrinking: each step would cost two process starts
@settings(
    max_examples=5,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_a_damaged_cache_gives_the_clean_result_and_names_its_folder(clean_cache, data):
    root, snapshot, clean, files = clean_cache
    picked = data.draw(st.lists(st.sampled_from(files), min_size=1, max_size=3, unique=True), label="files")
    shutil.rmtree(root)
    shutil.copytree(snapshot, root)
    damaged = []
    for relative in picked:
        how = data.draw(st.sampled_from(DAMAGES), label=f"damage {relative}")
        damage(
            root / relative,
            how,
            data.draw(st.floats(0, 0.999), label="where"),
            data.draw(st.integers(1, 255), label="bits"),
        )
        if how != "delete":
            damaged.append(root / relative)
    result = run(root)
    assert output(result)["out"] == clean["out"]
    named = [f"{path.name!r} in the" in result.stderr and str(path.parent) in result.stderr for path in damaged]
    # every damaged launcher source and index is read and named; a data file is read only
    # through a sound index of an unchanged source (a deleted or damaged one makes the data
    # file stale unread, to be overwritten), so it is named when nothing else was touched
    sound_index = all(path.suffix == ".nbc" for path in picked)
    for path, seen in zip(damaged, named):
        assert seen or (path.suffix == ".nbc" and not sound_index), result.stderr
    # the rebuilt cache is whole again: a further process loads the launcher from it
    assert output(run(root))["hits"] >= 1


def test_an_emptied_data_file_behind_a_deleted_index_is_rebuilt(clean_cache):
    """The case a CI run drew: launcher source and index deleted, the data file emptied. The
    data file is never read (no index points to it), so nothing names it; it is rebuilt."""
    root, snapshot, clean, files = clean_cache
    shutil.rmtree(root)
    shutil.copytree(snapshot, root)
    for relative in files:
        damage(root / relative, "empty" if relative.suffix == ".nbc" else "delete", 0.0, 1)
    assert output(run(root))["out"] == clean["out"]
    data_files = [root / relative for relative in files if relative.suffix == ".nbc"]
    assert data_files and all(path.stat().st_size > 0 for path in data_files)
    assert output(run(root))["hits"] >= 1


def test_an_unusable_cache_folder_falls_back_to_a_named_temporary_folder(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        folder = disk_cache.usable_folder(blocker / "launchers", "KERNELGYM_CACHE_DIR='x'")
    assert folder.is_dir() and not str(folder).startswith(str(blocker))
    (message,) = [str(w.message) for w in caught if w.category is disk_cache.CacheWarning]
    assert str(blocker / "launchers") in message and str(folder) in message and "KERNELGYM_CACHE_DIR" in message


def test_an_unusable_kernelgym_cache_dir_still_runs_the_kernel(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    env = dict(os.environ, KERNELGYM_CACHE_DIR=str(blocker), NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(TESTS)], capture_output=True, text=True, env=env, timeout=300
    )
    assert output(result)["out"] == [[v * 1.5 - 0.25 for v in (2 * i, 2 * i + 1)] for i in range(6)]
    assert "KERNELGYM_CACHE_DIR" in result.stderr and "temporary folder" in result.stderr
