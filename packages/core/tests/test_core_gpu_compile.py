"""kernelgym.core.gpu_compile: NVIDIA's real NVVM and ptxas compile kernels without a GPU.

Tests marked ``gpu_compile`` need the NVIDIA wheels (``tox -e gpu-compile``); the PTX
parsing tests run everywhere.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import core_gpu_only_bugs as bugs
from kernelgym.core import gpu_compile
from kernelgym.core.backends import simulator_enabled

FLOAT_OPS = ["add.rn", "sub.rn", "mul.rn", "fma.rn", "div.rn", "neg", "abs", "min", "max", "setp.lt", "sqrt.rn"]
# instructions that carry a float type but are not arithmetic, and integer arithmetic
NOT_FLOAT_ARITHMETIC = ["mov.f64 %fd1, %fd2;", "ld.global.f64 %fd1, [%rd1];", "st.global.f32 [%rd1], %f1;",
                        "cvt.rn.f32.f64 %f1, %fd1;", "add.s64 %rd1, %rd2, %rd3;", "setp.lt.s32 %p1, %r1, %r2;",
                        "ret;", "// add.f64 in a comment"]


@given(st.lists(st.tuples(st.sampled_from(FLOAT_OPS), st.sampled_from(["f16", "f32", "f64"]))),
       st.lists(st.sampled_from(NOT_FLOAT_ARITHMETIC)), st.randoms())
def test_float64_share_is_the_f64_fraction_of_float_arithmetic(float_ops, others, random):
    lines = [f"\t{op}.{kind} %r1, %r2, %r3;" for op, kind in float_ops] + [f"\t{line}" for line in others]
    lines += [f"\t@%p1 {op}.{kind} %r1, %r2;" for op, kind in float_ops[:1]]  # a predicated one counts too
    random.shuffle(lines)
    counted = float_ops + float_ops[:1]
    share = gpu_compile.float64_share("\n".join(lines))
    if not counted:
        assert share is None
    else:
        assert share == sum(kind == "f64" for _, kind in counted) / len(counted)


def test_ptxas_report_is_parsed_for_the_entry_function():
    report = """ptxas info    : 0 bytes gmem
ptxas info    : Function properties for helper
    8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function '_Z6kernel' for 'sm_90a'
ptxas info    : Function properties for _Z6kernel
    40 bytes stack frame, 4 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 52 registers, used 0 barriers
"""
    assert gpu_compile._entry_resources(report) == {
        "registers": 52, "stack_bytes": 40, "spill_store_bytes": 4, "spill_load_bytes": 8}


def test_target_names():
    assert [gpu_compile.target_name(cc) for cc in gpu_compile.TARGETS] == ["sm_90a", "sm_80"]


def _record(*launches):
    recorder = gpu_compile.LauncherRecorder()
    with recorder.workload("test launches"):
        for kernel, args in launches:
            kernel.launch("cpu", len(args[0]), *args)
    return recorder


@pytest.mark.gpu_compile
def test_a_kernel_that_runs_on_cpu_but_not_on_the_gpu_is_reported_by_name():
    x = np.arange(4.0)
    out, expected = np.zeros(4), np.zeros(4)
    recorder = _record((bugs.running_mean_with_scratch, (x, out)), (bugs.running_mean, (x, expected)))
    np.testing.assert_array_equal(out, x + 0.5)  # it runs on the cpu backend...
    np.testing.assert_array_equal(out, expected)
    builds = {(build.kernel, build.target): build for build in recorder.compile()}
    for target in ("sm_90a", "sm_80"):
        # ...but NVVM never gets it: the report names it and says why
        bad = builds[("core_gpu_only_bugs.running_mean_with_scratch", target)]
        assert not bad.ok and "zeros" in bad.error and bad.registers is None
        good = builds[("core_gpu_only_bugs.running_mean", target)]
        assert good.ok and good.registers > 0 and good.spill_store_bytes == 0
    table = gpu_compile.format_table(list(builds.values()))
    assert "| core_gpu_only_bugs.running_mean_with_scratch | sm_90a | FAILED: TypingError" in table
    assert "running_mean_with_scratch for sm_80" in gpu_compile.format_failures(list(builds.values()))


@pytest.mark.sim
def test_the_scratch_kernel_runs_in_the_simulator():
    from numba import cuda

    assert simulator_enabled()
    x = cuda.to_device(np.arange(4.0))
    out = cuda.to_device(np.zeros(4))
    bugs.running_mean_with_scratch.launch("sim", 4, x, out)
    np.testing.assert_array_equal(out.copy_to_host(), np.arange(4.0) + 0.5)


@pytest.mark.gpu_compile
def test_float64_share_tells_float32_from_float64_kernels():
    recorder = _record((bugs.halve_in_float32, (np.ones(3, np.float32),)), (bugs.running_mean, (np.ones(3), np.ones(3))))
    # compile() takes every launcher this process launched: keep these two
    shares = {build.kernel: build.float64_share for build in recorder.compile(targets=[(9, 0, "a")])}
    assert shares["core_gpu_only_bugs.halve_in_float32"] == 0.0
    assert shares["core_gpu_only_bugs.running_mean"] == 1.0


@pytest.mark.gpu_compile
def test_kernels_calling_atomic_add_compile_without_a_driver():
    from numba import cuda
    from numba.cuda.cudadrv.error import CudaSupportError

    from kernelgym.core import backends

    counts, noise, rng_states = np.zeros(2, np.float32), np.zeros(2), np.zeros((2, 2), np.uint64)
    gpu_compile._agents_share_a_counter.launch("cpu", 2, 3, counts, rng_states, noise, np.float32(1.0))
    np.testing.assert_array_equal(counts, [3.0, 3.0])
    module = gpu_compile._agents_share_a_counter._module(4)
    argtypes = module.cpu_launcher.signatures[0]
    for cc in gpu_compile.TARGETS:
        build = gpu_compile.compile_kernel(module.cuda_launcher.py_func, argtypes, cc)
        assert build.ok, build.error
    if backends.gpu_usable():
        return  # with a GPU the lookup succeeds: nothing to work around
    # the upstream limitation the module works around: numba-cuda asks the driver
    with pytest.raises(CudaSupportError):
        cuda.compile_ptx(module.cuda_launcher.py_func, argtypes, cc=(9, 0))
