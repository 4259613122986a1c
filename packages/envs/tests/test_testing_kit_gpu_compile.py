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
        for build in recorder.compile(targets=[(8, 0)])
        if build.kind == "agent" and build.origin.startswith("Tag")
    ]
    assert builds and all(build.ok and build.threads_per_block == 1024 for build in builds)
    for build in builds:
        assert bool(build.fit) == (build.registers > 64), (build.kernel, build.registers, build.fit)
    broken = [build for build in builds if build.fit]
    assert broken, "no Tag kernel uses more than 64 registers on sm_80 any more"
    assert all("registers per block" in problem for build in broken for problem in build.fit)
    assert all("launch fit (1024 threads per block)" in build.problems[0] for build in broken)
