"""The kit's gpu_compile check: an env that passes on cpu and sim but does not build for a GPU fails it.

Marked ``gpu_compile``: needs NVIDIA's NVVM and ptxas wheels (``tox -e gpu-compile``).
"""

import pytest

from kernelgym.envs.testing import check_env, format_report
from kernelgym.envs.testing.report import SKIPPED, CheckResult, Report
from kit_fixtures import gpu_only_walk, walk

SEED = 7


@pytest.mark.gpu_compile
def test_an_env_that_allocates_in_its_kernel_fails_only_the_gpu_compile_check():
    report = check_env(
        gpu_only_walk.SPEC, backend="cpu", max_examples=4, seed=SEED, checks=["parity", "autoreset", "gpu_compile"]
    )
    # the cpu build is a correct walk...
    assert report["parity"].passed and report["autoreset"].passed, format_report(report)
    # ...that NVVM rejects, with the kernel's name and the reason
    result = report["gpu_compile"]
    assert result.status == "failed"
    assert "gpu_only_walk.step_with_scratch" in result.message and "sm_90a" in result.message
    assert "zeros" in result.message
    assert not report.passed


# a fresh process: the kit's, before its first check, forks the compile's child (it launched
# nothing yet); once it launched something, it starts one. Both compile the same builds.
_FORKED_AND_STARTED = """
import json, sys
sys.path[:0] = {paths!r}
from kernelgym.envs.testing.child_process import ForkedChild
from kernelgym.envs.testing.gpu_compile import start_gpu_compile
from kernelgym.envs.vector_env import KernelVectorEnv
from kit_fixtures import walk

forked = start_gpu_compile(walk.SPEC)
kind = type(forked._process).__name__
first = forked.result()
KernelVectorEnv(walk.SPEC, 2, backend="cpu").reset(seed=0)  # a launch: the next child is started
started = start_gpu_compile(walk.SPEC)
print(json.dumps({{
    "kinds": [kind, type(started._process).__name__],
    "builds": [sorted((b.kernel, b.target, str(b.signature), b.registers) for b in result.builds)
               for result in (first, started.result())],
}}))
"""


@pytest.mark.gpu_compile
def test_a_forked_compile_child_builds_what_a_started_one_builds(tmp_path):
    import json
    import subprocess
    import sys

    script = _FORKED_AND_STARTED.format(paths=[path for path in sys.path if path])
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False, timeout=600)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["kinds"] == ["ForkedChild", "Popen"]
    forked, started = found["builds"]
    assert forked == started and len(forked) >= 4  # step and reset kernels, for both targets


@pytest.mark.gpu_compile
def test_the_correct_walk_compiles_for_both_targets():
    result = check_env(walk.SPEC, backend="cpu", checks=["gpu_compile"], seed=SEED)["gpu_compile"]
    assert result.passed, result.message
    assert "for sm_80, sm_90a" in result.note and "no spills" in result.note


def test_a_skipped_check_is_shown_with_its_reason_and_does_not_fail_the_report():
    hint = 'needs NVIDIA\'s compilers: pip install "kernelgym-envs[gpu-compile]"'
    passed = CheckResult("parity", "passed", 0.1)
    skipped = CheckResult("gpu_compile", SKIPPED, 0.0, message=hint)
    report = Report("Walk-v0", "cpu", 4, SEED, (passed, skipped), 0.1)
    text = format_report(report)
    assert report.passed and report.failures == ()
    assert "[skip] gpu_compile" in text and f"skipped: gpu_compile: {hint}" in text


def test_a_missing_cuda_extra_skips_the_check_without_starting_the_child(monkeypatch):
    from kernelgym.core import gpu_compile as core_gpu_compile
    from kernelgym.envs.testing.gpu_compile import compile_env_for_gpu

    monkeypatch.setattr(core_gpu_compile, "cuda_extra_missing", lambda: ("numba-cuda",))
    # the child would run this interpreter: a path that does not exist fails any start
    monkeypatch.setattr("sys.executable", "/nonexistent/python")
    result = compile_env_for_gpu(walk.SPEC)
    assert result.unavailable == core_gpu_compile.extra_missing_reason()
    assert result.unavailable.startswith("numba-cuda is not installed (the 'cuda' extra")
    assert result.builds == ()


@pytest.mark.gpu_compile
def test_an_agent_cap_of_1024_threads_would_not_fit_the_tag_kernels_with_more_than_64_registers(monkeypatch):
    """The issue's claim, checked with ptxas's real registers: raising MAX_AGENT_THREADS from
    256 to 1,024 breaks, on sm_80, exactly the Tag agent kernels that use more than 64
    registers per thread (65,536 registers per block / 1,024 threads); the others still fit.
    TagGridWorld's kernels (`kernelgym gpu-compile` builds TagContinuous's in the same CI env,
    all above 64 registers: compiling them again here took 3 minutes)."""
    from kernelgym.core import gpu_compile, kernels
    from kernelgym.envs.testing.gpu_compile import run_env_workloads

    recorder = gpu_compile.LauncherRecorder()
    run_env_workloads(recorder, "TagGridWorld-v0")
    monkeypatch.setattr(kernels, "MAX_AGENT_THREADS", 1024)
    builds = [
        build
        # (the launches of this workload only: the test process made many others before)
        for build in recorder.compile(targets=[(8, 0)], recorded_only=True)
        if build.kind == "agent" and build.origin.startswith("Tag")
    ]
    assert builds and all(build.ok and build.threads_per_block == 1024 for build in builds)
    for build in builds:
        assert bool(build.fit) == (build.registers > 64), (build.kernel, build.registers, build.fit)
    broken = [build for build in builds if build.fit]
    assert broken, "no Tag kernel uses more than 64 registers on sm_80 any more"
    assert all("registers per block" in problem for build in broken for problem in build.fit)
    assert all("launch fit (1024 threads per block)" in build.problems[0] for build in broken)
