"""``kernelgym compile``: fills the disk cache, so that a later process's make compiles nothing.

Runs in fresh interpreters with fresh cache folders (a cold cache compiles, about a minute).
"""

import os
import subprocess
import sys

from kernelgym.core.compile_notice import NOTICE_VARIABLE, notice_text

MAKE_AND_STEP = (
    "import kernelgym.envs as kge\n"
    "env = kge.make('CartPole-v1', num_envs=1024, backend='cpu', seed=1)\n"
    "env.reset(seed=1)\n"
    "env.step(env.action_space.sample())\n"
)


def run(argv, cache, timeout=900):
    environment = {key: value for key, value in os.environ.items() if key != NOTICE_VARIABLE}
    environment.update(NUMBA_CACHE_DIR=str(cache / "numba"), KERNELGYM_CACHE_DIR=str(cache / "kernelgym"))
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=timeout, env=environment)


def test_compile_fills_the_cache_and_a_later_make_prints_no_compile_line(tmp_path):
    line = notice_text("CartPole-v1", "cpu")
    command = ["-m", "kernelgym.cli", "compile", "CartPole-v1", "--backend", "cpu", "--autoreset-mode", "next_step"]
    first = run(command, tmp_path)
    assert first.returncode == 0, first.stderr
    assert first.stderr.splitlines().count(line) == 1, first.stderr  # before the compile, once
    [result] = first.stdout.splitlines()
    assert result.startswith("CartPole-v1 on cpu, autoreset next_step: compiled (") and result.endswith(" s"), result
    later = run(["-c", MAKE_AND_STEP], tmp_path)
    assert later.returncode == 0, later.stderr
    assert "compiling" not in later.stderr, later.stderr
    again = run(command, tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("CartPole-v1 on cpu, autoreset next_step: already cached"), again.stdout
    assert "compiling" not in again.stderr, again.stderr


def test_on_cpu_the_serial_twin_is_compiled_too_where_launches_may_run_the_thread_team(monkeypatch):
    import numba

    from kernelgym.cli.warm_up import env_counts

    monkeypatch.setenv("KERNELGYM_CPU_THREADS", "adaptive")
    team = numba.config.NUMBA_NUM_THREADS > 1
    assert env_counts("cpu", 1024) == ((1024, 1) if team else (1024,))
    assert env_counts("cpu", 64) == (64,)  # below PARALLEL_FROM: the serial twin is what binds
    assert env_counts("sim", 1024) == (1024,)
    monkeypatch.setenv("KERNELGYM_CPU_THREADS", "one")
    assert env_counts("cpu", 1024) == (1024,)


def test_each_line_says_what_happened_and_never_claims_a_cache_hit_it_cannot_know():
    from kernelgym.cli.warm_up import WarmUp, describe

    line = describe(WarmUp("CartPole-v1", "cpu", "same_step", 3, 41.04))
    assert line == "CartPole-v1 on cpu, autoreset same_step: compiled (3 functions, now in the disk cache) in 41.0 s"
    assert "already cached" in describe(WarmUp("CartPole-v1", "cpu", "next_step", 0, 2.0))
    assert "nothing to compile" in describe(WarmUp("CartPole-v1", "sim", "next_step", 0, 2.0))
    cuda = describe(WarmUp("CartPole-v1", "cuda", "next_step", None, 2.0))  # numba-cuda announces no compile
    assert "does not say which" in cuda and "already cached" not in cuda
