"""`kernelgym.core.compile_notice`: one stderr line before an env's first real compile, never on a cache load."""

import importlib
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kernelgym.core.kernels  # noqa: F401  (installs the compile listener, as every launcher's import does)
from kernelgym.core.compile_notice import NOTICE_VARIABLE, compile_notice, notice_enabled, notice_text, silenced

TWICE = "from numba import njit\n\n@njit(cache={cache})\ndef twice(x):\n    return 2 * x\n"


def fresh_module(tmp_path, name: str, cache: bool = True):
    """A function in a new file: numba's disk cache has never seen it, so its first call compiles."""
    (tmp_path / f"{name}.py").write_text(TWICE.format(cache=cache))
    sys.path.insert(0, str(tmp_path))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(tmp_path))


def test_the_first_compile_prints_the_line_once_per_env_and_backend(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(NOTICE_VARIABLE, raising=False)
    env_id = f"Notice-{tmp_path.name}-v0"
    first = fresh_module(tmp_path, f"notice_first_{tmp_path.name}")
    second = fresh_module(tmp_path, f"notice_second_{tmp_path.name}")
    with compile_notice(env_id, "cpu"):
        assert first.twice(2) == 4
        assert second.twice(2) == 4  # a second compile of the same env: no second line
    assert capsys.readouterr().err == notice_text(env_id, "cpu") + "\n"
    with compile_notice(env_id, "cpu"):
        assert first.twice(2.5) == 5.0  # compiles anew (float), announced already
    assert capsys.readouterr().err == ""
    other = fresh_module(tmp_path, f"notice_other_{tmp_path.name}")
    with compile_notice(env_id, "sim"):  # another backend is news again
        assert other.twice(1) == 2
    assert capsys.readouterr().err == notice_text(env_id, "sim") + "\n"


def test_the_line_names_the_env_and_the_backend():
    assert notice_text("CartPole-v1", "cpu") == "compiling CartPole-v1 for cpu (first run only, cached after)"


def test_no_line_outside_a_notice_when_silenced_or_for_uncached_functions(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(NOTICE_VARIABLE, raising=False)
    env_id = f"Quiet-{tmp_path.name}-v0"
    fresh_module(tmp_path, f"quiet_outside_{tmp_path.name}").twice(2)
    with compile_notice(env_id, "cpu"), silenced():
        fresh_module(tmp_path, f"quiet_silenced_{tmp_path.name}").twice(2)
    with compile_notice(env_id, "cpu"):  # no disk cache: it compiles in every process, no news
        fresh_module(tmp_path, f"quiet_uncached_{tmp_path.name}", cache=False).twice(2)
    monkeypatch.setenv(NOTICE_VARIABLE, "0")
    with compile_notice(env_id, "cpu"):
        fresh_module(tmp_path, f"quiet_variable_{tmp_path.name}").twice(2)
    assert capsys.readouterr().err == ""


def test_a_cache_load_prints_no_line(tmp_path):
    # two processes sharing one cache folder: the first compiles (the line), the second loads
    (tmp_path / "loaded_twice.py").write_text(TWICE.format(cache=True))
    script = textwrap.dedent("""
        import kernelgym.core.kernels
        from kernelgym.core.compile_notice import compile_notice
        import loaded_twice
        with compile_notice("Loaded-v0", "cpu"):
            assert loaded_twice.twice(3) == 6
    """)
    environment = {"NUMBA_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(tmp_path)}
    runs = [
        subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            timeout=300,
            env={**_inherited(), **environment},
        )
        for _ in range(2)
    ]
    assert [run.returncode for run in runs] == [0, 0], [run.stderr for run in runs]
    assert notice_text("Loaded-v0", "cpu") in runs[0].stderr
    assert "compiling" not in runs[1].stderr, runs[1].stderr


def _inherited() -> dict:
    import os

    return {key: value for key, value in os.environ.items() if key not in (NOTICE_VARIABLE, "PYTHONPATH")}


# no NUL and no lone surrogate: no environment variable can hold one
SETTINGS = st.text(st.characters(codec="utf-8", exclude_characters="\0"), max_size=8)


@given(SETTINGS.filter(lambda text: text.strip() not in ("", "0", "1")))
def test_a_bad_setting_is_refused_naming_the_variable_before_anything_compiles(value):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(NOTICE_VARIABLE, value)
        with pytest.raises(ValueError, match=NOTICE_VARIABLE) as error:
            notice_enabled()
        assert repr(value.strip()) in str(error.value)
        with pytest.raises(ValueError, match=NOTICE_VARIABLE), compile_notice("Any-v0", "cpu"):
            pytest.fail("the block ran with a bad setting")


@pytest.mark.parametrize(("value", "enabled"), [("1", True), ("0", False), (" 0 ", False), ("", True)])
def test_good_settings(value, enabled, monkeypatch):
    monkeypatch.setenv(NOTICE_VARIABLE, value)
    assert notice_enabled() is enabled


CUDA_PROBE = textwrap.dedent(
    """
    import sys
    from numba import cuda, types  # numba-cuda's own package, not the simulator
    from numba.cuda import dispatcher
    from kernelgym.core import compile_log, compile_notice

    compile_log.install()  # as a cuda launcher's build does once numba.cuda is imported

    def probe(x):
        x[0] = 1.0

    with compile_notice.compile_notice("Probe-v0", "cuda"):
        for _ in range(2):
            try:  # a cache miss builds a _Kernel; without a GPU the build fails after the line
                dispatcher._Kernel(probe, (types.float64[::1],))
            except Exception as error:
                print("build:", type(error).__name__)
    print("hooked", compile_notice.hook_cuda_compiles())
    """
)


def test_a_cuda_kernel_build_prints_the_line_once(monkeypatch):
    pytest.importorskip("numba_cuda", reason="the cuda extra: numba-cuda's dispatcher is what is hooked")
    monkeypatch.delenv(NOTICE_VARIABLE, raising=False)
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
    done = subprocess.run([sys.executable, "-c", CUDA_PROBE], capture_output=True, text=True, timeout=300)
    assert "hooked True" in done.stdout, done.stdout + done.stderr
    assert done.stderr.count(notice_text("Probe-v0", "cuda")) == 1, done.stderr
