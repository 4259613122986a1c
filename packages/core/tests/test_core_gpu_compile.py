"""kernelgym.core.gpu_compile: NVIDIA's real NVVM and ptxas compile kernels without a GPU;
the PTX audit (kernelgym.core.ptx_audit) and the launch fit (kernelgym.core.launch_fit).

Tests marked ``gpu_compile`` need the NVIDIA wheels (``tox -e gpu-compile``); the PTX
parsing tests run everywhere.
"""

import dataclasses
import json
import math
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import core_gpu_only_bugs as bugs
from core_test_kernels import affine
from kernelgym.core import agent_kernel, atomic_add, env_kernel, gpu_compile, kernels, launch_fit, ptx_audit
from kernelgym.core.backends import simulator_enabled

FLOAT_OPS = ["add.rn", "sub.rn", "mul.rn", "fma.rn", "div.rn", "neg", "abs", "min", "max", "setp.lt", "sqrt.rn"]
# instructions that carry a float type but are not arithmetic, and integer arithmetic
NOT_FLOAT_ARITHMETIC = [
    "mov.f64 %fd1, %fd2;",
    "ld.global.f64 %fd1, [%rd1];",
    "st.global.f32 [%rd1], %f1;",
    "cvt.rn.f32.f64 %f1, %fd1;",
    "add.s64 %rd1, %rd2, %rd3;",
    "setp.lt.s32 %p1, %r1, %r2;",
    "ret;",
    "// add.f64 in a comment",
]


@given(
    st.lists(st.tuples(st.sampled_from(FLOAT_OPS), st.sampled_from(["f16", "f32", "f64"]))),
    st.lists(st.sampled_from(NOT_FLOAT_ARITHMETIC)),
    st.randoms(),
)
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
        "registers": 52,
        "stack_bytes": 40,
        "spill_store_bytes": 4,
        "spill_load_bytes": 8,
    }


def test_target_names():
    assert [gpu_compile.target_name(cc) for cc in gpu_compile.TARGETS] == ["sm_90a", "sm_80"]


def _record(*launches):
    recorder = gpu_compile.LauncherRecorder(run_on_cpu=True)
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


@env_kernel
def _launched_before_recording(env, x):
    x[env] += 1.0


@env_kernel
def _launched_in_the_workload(env, x):
    x[env] *= 2.0


@pytest.mark.gpu_compile
def test_recorded_only_compiles_the_workloads_launches_not_the_processs_others():
    x = np.ones(3)
    _launched_before_recording.launch("cpu", 3, x)  # another launch of this process, before recording
    recorder = gpu_compile.LauncherRecorder()
    with recorder.workload("mine"):
        _launched_in_the_workload.launch("cpu", 3, x)
    recorded = {build.kernel for build in recorder.compile(targets=[(8, 0)], recorded_only=True)}
    assert recorded == {"test_core_gpu_compile._launched_in_the_workload"}
    # what compile() takes by default (not compiled here: a test process launched many more)
    launched = {
        gpu_compile.launcher_name(gpu_compile.imported_launchers()[name])
        for name, _ in gpu_compile.all_launched_signatures()
    }
    assert {"test_core_gpu_compile._launched_before_recording", *recorded} <= launched


@pytest.mark.gpu_compile
def test_float64_share_tells_float32_from_float64_kernels():
    recorder = _record(
        (bugs.halve_in_float32, (np.ones(3, np.float32),)), (bugs.running_mean, (np.ones(3), np.ones(3)))
    )
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


# ------------------------------------------------------------------------ the PTX audit
ROUNDED = [
    "add.rn.f64",
    "sub.rn.f32",
    "mul.rn.f64",
    "mul.rn.ftz.f32",
    "div.rn.f64",
    "neg.f64",
    "abs.f32",
    "setp.lt.f64",
    "sqrt.rn.f32",
    "max.f64",
]
UNROUNDED = ["add.f64", "sub.f32", "mul.f64", "mul.ftz.f32", "add.rz.f32"]
FMAS = ["fma.rn.f64", "fma.rn.f32", "fma.rm.f32", "fma.rz.f64", "mad.rn.f64"]
APPROXIMATE = ["rcp.approx.ftz.f64", "ex2.approx.ftz.f32", "sin.approx.f32", "rsqrt.approx.f64", "add.rn.ftz.f32"]


def _shuffled(opcodes, random) -> list:
    """The opcodes (as they will appear) and PTX lines: the opcodes' among other instructions."""
    lines = [(opcode, f"\t{opcode} \t%fd1, %fd2, %fd3;") for opcode in opcodes]
    lines += [(None, f"\t{line}") for line in NOT_FLOAT_ARITHMETIC]
    random.shuffle(lines)
    return lines


@given(
    st.lists(st.sampled_from(ROUNDED + UNROUNDED + FMAS + APPROXIMATE)),
    st.integers(0, 6),
    st.sets(st.sampled_from(APPROXIMATE)),
    st.randoms(),
)
def test_the_audit_flags_exactly_contraction_unrounded_and_foreign_approximate_instructions(
    opcodes, reference_fma, libdevice_own, random
):
    lines = _shuffled(opcodes, random)
    ptx = "\n".join(line for _, line in lines)
    opcodes = [opcode for opcode, _ in lines if opcode is not None]  # in PTX order
    findings = ptx_audit.audit_ptx(ptx, reference_fma, frozenset(libdevice_own))
    fmas = [opcode for opcode in opcodes if opcode in FMAS]
    unrounded = [opcode for opcode in opcodes if opcode in UNROUNDED]
    foreign = [
        opcode
        for opcode in opcodes
        if opcode in APPROXIMATE + ["mul.rn.ftz.f32", "mul.ftz.f32"] and opcode not in libdevice_own
    ]
    assert ptx_audit.fma_count(ptx) == len(fmas)
    contracted = [finding for finding in findings if finding.startswith("contracted fma")]
    assert len(contracted) == (len(fmas) > reference_fma)
    if contracted:  # the finding names the first offending instruction, whitespace normalised
        assert f"{len(fmas)} fma in this build, {reference_fma} in its -fma=0 reference" in contracted[0]
        assert contracted[0].endswith(f"first: `{fmas[0]} %fd1, %fd2, %fd3;`")
    if unrounded:
        (finding,) = [finding for finding in findings if "without .rn" in finding]
        assert finding.startswith(f"{len(unrounded)} float add/sub/mul without .rn")
        assert finding.endswith(f"first: `{unrounded[0]} %fd1, %fd2, %fd3;`")
    if foreign:
        (finding,) = [finding for finding in findings if "approximate or flush-to-zero" in finding]
        assert finding.startswith(f"{len(foreign)} approximate") and f"`{foreign[0]} " in finding
    assert len(findings) == bool(contracted) + bool(unrounded) + bool(foreign)
    # without a reference (a build with no fma needs none) the fma rule is not applied
    assert not any(finding.startswith("contracted") for finding in ptx_audit.audit_ptx(ptx))


def test_libdevice_calls_are_read_from_the_nvvm_input_declarations():
    numba_module = (
        'declare double @"__nv_sin"(double %".1")\ndeclare i32 @"__nv_finitef"(float %".1")\n'
        'declare i32 @"llvm.nvvm.read.ptx.sreg.tid.x"()\n  %"r" = call double @"__nv_sin"(double %"x")\n'
    )
    ir = [numba_module, b"declare float @__nv_powf(float, float)\ndeclare double @mymodule__nv_cos(double)\n"]
    assert ptx_audit.libdevice_calls(ir) == ("finitef", "powf", "sin")
    assert ptx_audit.libdevice_calls(ir[0]) == ("finitef", "sin")
    assert [ptx_audit.ulp_bound(name) for name in ("sin", "powf", "finitef", "lgamma")] == [
        "sin (2 ulp)",
        "powf (4 ulp)",
        "finitef (0 ulp)",
        "lgamma (? ulp)",
    ]


def test_static_shared_memory_is_parsed_for_the_entry_function():
    report = (
        "ptxas info    : Function properties for helper\n    8 bytes smem\n"
        "ptxas info    : Compiling entry function '_Z6kernel' for 'sm_80'\n"
        "ptxas info    : Used 52 registers, used 1 barriers, 2048 bytes smem, 380 bytes cmem[0]\n"
    )
    assert gpu_compile._entry_shared_bytes(report) == 2048
    assert gpu_compile._entry_shared_bytes(report.replace("2048 bytes smem, ", "")) == 0


def test_a_contracted_build_is_reported_but_not_failed_and_builds_survive_json():
    findings = ("contracted fma: 3 fma in this build, 0 in its -fma=0 reference; first: `fma.rn.f64 %fd1;`",)
    default = gpu_compile.KernelBuild(
        "k",
        "(float64)",
        "sm_80",
        registers=32,
        audit=findings,
        fma=3,
        libdevice=("sin",),
        threads_per_block=128,
        occupancy=1.0,
        fit=(),
    )
    fast = dataclasses.replace(default, contracted=True)
    assert default.problems == ("PTX audit: " + findings[0],) and not default.passed
    assert fast.problems == () and fast.passed
    too_big = dataclasses.replace(fast, fit=("no block fits an SM",))
    assert too_big.problems == ("launch fit (128 threads per block): no block fits an SM",)
    table = gpu_compile.format_table([default, fast])
    assert "| FAILED: contracted fma: 3 fma in this build, 0 in its -fma=0 reference |" in table
    assert "fast-math build (opt-in, 3 fma)" in table and "sin (2 ulp)" in table
    assert "PTX audit: contracted fma" in gpu_compile.format_failures([default, fast])
    for build in (default, fast, too_big):
        assert gpu_compile.KernelBuild.from_dict(json.loads(json.dumps(dataclasses.asdict(build)))) == build


# ------------------------------------------------------------------------ the launch fit
def _resident_blocks_by_placement(limits, registers, threads, shared):
    """A plain reference: place blocks on one SM until one does not fit. Each block's warps go
    to the least-loaded of the 4 sub-partitions, each with a quarter of the register file;
    a warp takes its registers in 256-register units."""
    warps = -(-threads // 32)
    per_warp = -(-registers * 32 // 256) * 256
    partitions = [0] * 4  # warps held
    shared_used = blocks = 0
    block_shared = -(-shared // 128) * 128 + 1024
    while blocks < limits.max_blocks_per_sm:
        trial = sorted(partitions)
        for _ in range(warps):
            trial[0] += 1
            trial.sort()
        if (
            sum(trial) > limits.max_warps_per_sm
            or max(trial) * per_warp > limits.registers_per_sm // 4
            or shared_used + block_shared > limits.shared_per_sm
        ):
            break
        partitions, shared_used, blocks = trial, shared_used + block_shared, blocks + 1
    return blocks


@given(
    st.sampled_from(["sm_80", "sm_90a"]),
    st.integers(0, 300),
    st.integers(1, 1100),
    st.one_of(st.just(0), st.integers(0, 64 * 1024)),
)
def test_launch_fit_agrees_with_placing_blocks_on_an_sm(target, registers, threads, shared):
    fit = launch_fit.launch_fit(target, registers, threads, shared)
    limits = launch_fit.limits_for(target)
    blocks = _resident_blocks_by_placement(limits, registers, threads, shared)
    within_launch_limits = threads <= 1024 and registers <= 255 and shared <= 48 * 1024
    assert fit.fits == (within_launch_limits and blocks > 0)
    assert fit.active_blocks == (blocks if fit.fits else 0)
    assert fit.active_warps == fit.active_blocks * -(-threads // 32)
    assert fit.occupancy == fit.active_warps / 64
    assert fit.registers_per_block == -(-registers // 8) * 8 * 32 * -(-threads // 32)


def test_the_launch_limits_are_nvidias():
    fit = launch_fit.launch_fit
    assert fit("sm_80", 64, 1024).fits and not fit("sm_80", 65, 1024).fits  # 65,536 registers per block
    assert "73728 registers per block" in fit("sm_80", 72, 1024).problems[0]
    assert fit("sm_90a", 255, 256).fits and not fit("sm_90a", 256, 32).fits
    assert not fit("sm_80", 16, 1025).fits
    assert fit("sm_80", 16, 128, 48 * 1024).fits and not fit("sm_90", 16, 128, 48 * 1024 + 1).fits
    assert fit("sm_80", 16, 128, grid=(2**31 - 1, 65535, 65535)).fits
    assert fit("sm_80", 16, 128, grid=(1, 65536, 1)).problems == ("grid y of 65536 blocks > 65535",)
    # occupancy: 32 registers and 128 threads fill the SM; 48 registers leave 40 of 64 warps
    assert fit("sm_80", 32, 128).occupancy == 1.0
    assert (fit("sm_80", 48, 128).active_warps, fit("sm_80", 48, 128).limited_by) == (40, "registers")
    assert fit("sm_90a", 16, 32).limited_by == "blocks" and fit("sm_90a", 16, 32).occupancy == 0.5
    with pytest.raises(ValueError, match="target: expected one of"):
        fit("sm_75", 16, 32)


def test_fit_is_checked_at_the_configured_cap(monkeypatch):
    from kernelgym.core import kernels

    assert launch_fit.configured_threads_per_block("env") == kernels.ENV_THREADS_PER_BLOCK == 128
    assert launch_fit.configured_threads_per_block("agent") == kernels.MAX_AGENT_THREADS == 256
    monkeypatch.setattr(kernels, "MAX_AGENT_THREADS", 1024)
    assert launch_fit.configured_threads_per_block("agent") == 1024


# ------------------------------------------------------------- the audit on real builds
@env_kernel
def _log_and_exp(i, x, out, out32):
    out[i] = math.log(x[i]) + math.exp(x[i])
    out32[i] = math.exp(np.float32(x[i]))


def _affine_build(cc, **options):
    x = np.ones((3, 2))
    affine.launch("cpu", 3, x, np.zeros_like(x), 1.5, -2.0)
    module = affine._module(4)
    return gpu_compile.compile_kernel(module.cuda_launcher.py_func, module.cpu_launcher.signatures[0], cc, **options)


@pytest.mark.gpu_compile
@pytest.mark.parametrize("cc", gpu_compile.TARGETS, ids=gpu_compile.target_name)
def test_the_audit_passes_a_default_build_and_fails_a_contracted_one(cc):
    default = _affine_build(cc)
    assert default.passed, default.problems
    assert default.audit == () and default.fma == 0 and default.kind == "env" and default.threads_per_block == 128
    # the same launcher with NVVM's contraction forced on: x * scale + shift becomes one fma
    contracted = _affine_build(cc, nvvm_options={"fma": True})
    assert contracted.ok and contracted.fma > 0 and not contracted.passed
    (fused,) = [finding for finding in contracted.audit if finding.startswith("contracted fma")]
    assert f"{contracted.fma} fma in this build, 0 in its -fma=0 reference; first: `fma.rn.f64 " in fused
    report = gpu_compile.format_failures([default, contracted])
    assert f"for {gpu_compile.target_name(cc)}" in report and "PTX audit: contracted fma" in report


@pytest.mark.gpu_compile
@pytest.mark.parametrize("cc", gpu_compile.TARGETS, ids=gpu_compile.target_name)
def test_libdevice_functions_keep_their_own_fmas_and_approximations(cc):
    x = np.linspace(0.5, 2.0, 4)
    out, out32 = np.zeros(4), np.zeros(4, np.float32)
    _log_and_exp.launch("cpu", 4, x, out, out32)
    module = _log_and_exp._module(3)
    build = gpu_compile.compile_kernel(module.cuda_launcher.py_func, module.cpu_launcher.signatures[0], cc)
    assert build.passed, build.problems
    assert build.libdevice == ("exp", "expf", "log")
    # log seeds its Newton step with rcp.approx.ftz.f64, expf scales with ex2.approx.ftz.f32:
    # listed as libdevice's, with NVIDIA's bound, not failed
    assert "rcp.approx.ftz.f64 in log (1 ulp)" in build.libdevice_approximate
    assert "ex2.approx.ftz.f32 in expf (2 ulp)" in build.libdevice_approximate
    assert build.fma > 0  # libdevice's polynomials: explicit fma.rn, kept under -fma=0
    table = gpu_compile.format_table([build])
    assert "| ok; libdevice-internal " in table and "exp (1 ulp), expf (2 ulp), log (1 ulp)" in table
    # a kernel that calls no libdevice function may use no approximate instruction at all
    assert ptx_audit.audit_ptx("\tex2.approx.ftz.f32 %f1, %f2;", 0, frozenset())


@given(registers=st.integers(1, 255), agents=st.integers(1, 1000))
def test_packing_envs_into_blocks_never_leaves_an_sm_emptier(registers, agents):
    """Issue 26: an agent kernel's launch packs whole envs into blocks, so a few agents per
    env no longer leave most of an SM's thread slots idle, and no packing is emptier than one
    env per block at any register count (every count up to 255 fits a 256-thread block)."""
    build = gpu_compile.KernelBuild(kernel="step", target="sm_90a", signature="()", registers=registers, kind="agent")
    envs_per_block, per_env = launch_fit.agent_block(agents, kernels.MAX_AGENT_THREADS)
    one_per_block = gpu_compile.busy_lanes(build, per_env, per_env)
    packed = gpu_compile.busy_lanes(build, envs_per_block * per_env, envs_per_block * per_env)
    assert packed >= one_per_block
    if agents <= 16:
        # one env per block: one warp with idle lanes, at most 32 blocks per SM
        assert one_per_block <= 32 * agents / 2048 and packed >= 2 * one_per_block


def test_tags_default_launch_fills_most_of_an_sm():
    """Tag's 11 agents at 40 registers: one env per block kept 17% of an H100 SM's lanes busy."""
    build = gpu_compile.KernelBuild(kernel="step", target="sm_90a", signature="()", registers=40, kind="agent")
    assert gpu_compile.busy_lanes(build, 11, 11) == pytest.approx(32 * 11 / 2048)
    assert launch_fit.agent_block(11, 256) == (11, 11)
    assert gpu_compile.busy_lanes(build, 121, 121) == pytest.approx(12 * 121 / 2048)
    table = gpu_compile.format_agent_packing([build])
    assert table.count("\n") == 2 and "17% -> 71% (11 per block)" in table and "(1 per block)" in table


@env_kernel
def _typed_only_double(env, x, out):
    out[env] = 2.0 * x[env]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16])
def test_a_typing_only_launch_records_the_types_a_compile_gives_and_runs_nothing(dtype):
    x = np.arange(1, 5).astype(dtype)
    out = np.zeros(4, dtype)
    before = set(gpu_compile._TYPED_ONLY)
    with gpu_compile.typing_cpu_launches_only():
        _typed_only_double.launch("cpu", 4, x, out)
    recorded = gpu_compile._TYPED_ONLY - before
    assert np.array_equal(out, np.zeros(4, dtype))  # nothing ran
    ((module_name, argtypes),) = recorded
    module = gpu_compile.imported_launchers()[module_name]

    def compiled():  # (the other dtypes' cases compile this launcher for their own types)
        return [gpu_compile._unpacked(signature) for signature in module.cpu_launcher.signatures]

    assert argtypes not in compiled()  # nothing compiled for these types
    assert argtypes in gpu_compile.launched_signatures(module)  # yet the recorder sees them
    _typed_only_double.launch("cpu", 4, x, out)  # outside the block: compiled, and run
    assert np.array_equal(out, 2 * x)
    assert argtypes in compiled()  # the types a real compile took


@env_kernel
def _packed_shift(env, x, out, counts, shift):
    out[env] = x[env] + shift
    counts[env] += 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_typing_only_bound_launch_packs_the_struct_a_compiled_bind_packs(dtype):
    # a bound program's cpu launch takes its bound arrays packed by the module's cpu_bind: typing
    # only, cpu_bind is not compiled either, and its stand-in is typed as the compiled one's struct
    from kernelgym.core import bind

    def values():
        # uint16 counts: no other program of a test session binds these types (programs with the
        # same bound fields share one cpu_bind), so its first compile for them is this test's
        return {"x": np.arange(4, dtype=dtype), "out": np.zeros(4, dtype), "counts": np.zeros(4, np.uint16), "shift": 2}

    typed_values = values()
    before = set(gpu_compile._TYPED_ONLY)
    with gpu_compile.typing_cpu_launches_only():
        bind(_packed_shift, typed_values, backend="cpu", num_envs=4)()
    ((module_name, typed),) = gpu_compile._TYPED_ONLY - before
    module = gpu_compile.imported_launchers()[module_name]
    binds = len(module.cpu_bind.signatures)  # (the other dtype's case compiles this module for its types)
    assert not typed_values["counts"].any()  # nothing ran
    compiled_values = values()
    bind(_packed_shift, compiled_values, backend="cpu", num_envs=4)()  # outside: compiled, and run
    np.testing.assert_array_equal(compiled_values["out"], np.arange(4, dtype=dtype) + 2)
    assert len(module.cpu_bind.signatures) == binds + 1  # the typed launch packed without compiling
    launched = [gpu_compile._unpacked(signature) for signature in module.cpu_serial_launcher.signatures]
    assert typed in launched  # the types a real bind and launch took


@env_kernel
def _recorded_scale(env, x, out):
    out[env] = 3.0 * x[env] + 1.0


def test_a_recorder_types_its_workloads_cpu_launches_unless_asked_to_run_them():
    x = np.arange(3.0)
    for run_on_cpu in (False, True):  # typed first: this kernel was never compiled in this process
        out = np.zeros(3)
        recorder = gpu_compile.LauncherRecorder(run_on_cpu=run_on_cpu)
        with recorder.workload(f"run_on_cpu={run_on_cpu}"):
            _recorded_scale.launch("cpu", 3, x, out)
        assert np.array_equal(out, 3.0 * x + 1.0 if run_on_cpu else np.zeros(3))
        # the typed launch's types are the compiled launch's: new to the first recorder only
        assert list(recorder.origins.values()) == ([] if run_on_cpu else ["run_on_cpu=False"])


@agent_kernel
def _atomic_totals(env, agent, num_agents, totals64, totals32, values):
    """numba-cuda 0.30 lowers the float64 atomic add by compute capability (below 6.0 a CAS loop)."""
    atomic_add(totals64, env, values[env, agent])
    atomic_add(totals32, env, np.float32(values[env, agent]))


@pytest.mark.gpu_compile
def test_one_lowering_gives_each_target_numba_cudas_own_ptx():
    """`compile_kernel_for_targets` lowers once and asks NVVM for each target's PTX: the same PTX
    as numba-cuda's own build for that target (``cuda.compile_ptx(cc=...)``), which lowers anew."""
    from numba import cuda

    recorder = gpu_compile.LauncherRecorder()
    with recorder.workload("lowering"):
        _atomic_totals.launch("cpu", 2, 3, np.zeros(2), np.zeros(2, np.float32), np.ones((2, 3)))
        affine.launch("cpu", 2, np.ones((2, 2)), np.zeros((2, 2)), 2.0, 1.0)
    launchers = gpu_compile.imported_launchers()
    # (other tests may have launched affine with these types first: not new to this recorder)
    keys = [
        key for key in gpu_compile.all_launched_signatures() if "_atomic_totals_" in key[0] or "env_affine_" in key[0]
    ]
    assert {"atomic" if "atomic" in name else "affine" for name, _ in keys} == {"atomic", "affine"}
    for module_name, argtypes in keys:
        pyfunc = launchers[module_name].cuda_launcher.py_func
        with gpu_compile._device_capability_answered_with(gpu_compile.TARGETS[0]):
            library = gpu_compile._lowered(pyfunc, argtypes, gpu_compile.TARGETS[0])
        for cc in gpu_compile.TARGETS:
            with gpu_compile._device_capability_answered_with(cc):
                (shared,) = library.get_asm_strs(cc=cc)
                own, _ = cuda.compile_ptx(pyfunc, tuple(argtypes), cc=cc)
            assert _symbols_numbered(shared) == _symbols_numbered(own), (module_name, cc)


def _symbols_numbered(ptx: str) -> str:
    """``ptx`` with each mangled symbol replaced by its order of first use: numba's names hold a
    counter of its compiles and its target flags (the compute capability among them)."""
    names: dict[str, str] = {}
    return re.sub(r"_ZN[A-Za-z0-9_$]+", lambda match: names.setdefault(match.group(0), f"symbol{len(names)}"), ptx)
