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
    report = check_env(gpu_only_walk.SPEC, backend="cpu", max_examples=4, seed=SEED,
                       checks=["parity", "autoreset", "gpu_compile"])
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
