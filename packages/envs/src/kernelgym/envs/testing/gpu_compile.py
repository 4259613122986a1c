"""Does an env compile for the GPU? The kit's ``gpu_compile`` check, without a GPU.

The env runs a few steps on the ``cpu`` backend in both autoreset modes; then every
kernel it launched is compiled, with the argument types those launches passed, for
sm_90a and sm_80 by NVIDIA's NVVM and ptxas (see `kernelgym.core.gpu_compile`).
The CUDA simulator runs kernels as Python and accepts code NVVM rejects, so an env can
pass every other check on ``cpu`` and ``sim`` and still fail to build on a GPU. Each build
must also pass the PTX audit (no contracted fma, no unrounded or approximate float
instruction outside libdevice: the same bits as the cpu twin; `kernelgym.core.ptx_audit`)
and its configured launch must fit sm_80 and sm_90 (`kernelgym.core.launch_fit`).

The compile runs in a child process: the simulator must be off there (it replaces
``numba.cuda`` in the process that enables it), and the child must not have launched
anything but this env's workload (`LauncherRecorder.compile` compiles every launch of its
process). A fork of a process that launched nothing yet (the kit's, before its first
check) is such a child, with its imports done; otherwise the child is a fresh process.

Needs NVIDIA's compilers as pip wheels: ``pip install "kernelgym-envs[gpu-compile]"``.
Where they are missing the check says so and is skipped (never silently).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pickle
import sys
import tempfile
import warnings

import numpy as np

from kernelgym.envs.testing.child_process import (
    fork_child,
    fork_refusal,
    read_stderr,
    start_child,
    stop_child,
    transportable_env,
    write_json,
)

__all__ = [
    "AUTORESET_MODES",
    "EXTRA_HINT",
    "EnvCompileResult",
    "GpuCompileSkippedWarning",
    "check_gpu_compile",
    "compile_env_for_gpu",
    "gpu_compile_test",
    "run_env_workloads",
    "PendingGpuCompile",
    "start_gpu_compile",
]

EXTRA_HINT = 'pip install "kernelgym-envs[gpu-compile]"'
AUTORESET_MODES = ("next_step", "same_step")
_UNAVAILABLE_EXIT_CODE = 3
_CHILD_TIMEOUT_S = 900


class GpuCompileSkippedWarning(UserWarning):
    """The GPU-compile test was skipped: NVIDIA's compilers are not installed here."""


@dataclasses.dataclass(frozen=True)
class EnvCompileResult:
    """What `compile_env_for_gpu` found.

    Attributes
    ----------
    builds : tuple of kernelgym.core.gpu_compile.KernelBuild
        One per kernel, argument types and target.
    unavailable : str or None
        Why nothing could be compiled (NVIDIA's compilers are not installed).
    workload_errors : tuple of str
        Tracebacks of workloads that raised on the cpu backend.
    """

    builds: tuple = ()
    unavailable: str | None = None
    workload_errors: tuple = ()

    @property
    def failed(self) -> tuple:
        """Builds that did not compile."""
        return tuple(build for build in self.builds if not build.ok)

    @property
    def problems(self) -> tuple:
        """Builds that did not compile, failed the PTX audit or do not fit their launch."""
        return tuple(build for build in self.builds if build.problems)


def run_env_workloads(
    recorder,
    env,
    params: dict | None = None,
    num_envs: int = 4,
    steps: int = 3,
    seed: int = 0,
    keep_going: bool = False,
    precisions=None,
) -> None:
    """Run ``env`` on the ``cpu`` backend under a `LauncherRecorder`, in both autoreset modes.

    Each mode (and precision): make, reset, ``steps`` steps with random valid actions.

    Parameters
    ----------
    recorder : kernelgym.core.gpu_compile.LauncherRecorder
    env : str or EnvSpec
    params : dict, optional
        Overrides of the env's params.
    precisions : iterable of str, optional
        The precisions to build, for an env that declares them; default all it declares.
    """
    from kernelgym.envs.registry import get_spec
    from kernelgym.envs.vector_env import KernelVectorEnv

    spec = get_spec(env) if isinstance(env, str) else env
    variants = [
        (mode, precision)
        for precision in (spec.precisions if precisions is None else precisions) or [None]
        for mode in AUTORESET_MODES
    ]
    for mode, precision in variants:
        with recorder.workload(f"{spec.id} {mode}" + (f" {precision}" if precision else ""), keep_going):
            vector_env = KernelVectorEnv(
                spec, num_envs, backend="cpu", seed=seed, autoreset_mode=mode, precision=precision, **(params or {})
            )
            recorder.record_step(f"{spec.id} {mode}" + (f" {precision}" if precision else ""), vector_env._step_launch)
            vector_env.action_space.seed(seed)
            vector_env.reset(seed=seed, numpy=True)
            for _ in range(steps):
                vector_env.step(np.asarray(vector_env.action_space.sample()), numpy=True)
            vector_env.close()


def compile_env_for_gpu(env, params: dict | None = None, precisions=None) -> EnvCompileResult:
    """Compile every kernel of ``env`` for the GPU, in a child process (see the module docstring).

    Parameters
    ----------
    env : str or EnvSpec
        A registered env id, ``"module:attr"`` of a spec, or a spec (picklable, registered
        through an installed distribution's entry point, or a global of an importable
        module, which the child imports: a spec holding a lambda cannot be pickled).
    params : dict, optional
        Overrides of the env's params.
    precisions : iterable of str, optional
        For an env that declares precisions: those to build (default all it declares).

    Raises
    ------
    TypeError
        A spec the child process cannot receive.
    RuntimeError
        The child process crashed.
    """
    return start_gpu_compile(env, params, precisions).result()


class PendingGpuCompile:
    """A `start_gpu_compile` child process at work; `result` waits for its `EnvCompileResult`."""

    def __init__(self, process=None, folder=None, unavailable: str | None = None):
        self._process = process
        self._folder = folder
        self._unavailable = unavailable

    def result(self) -> EnvCompileResult:
        """Wait for the child (at most its timeout) and read what it compiled.

        Raises
        ------
        RuntimeError
            The child process crashed.
        """
        from kernelgym.core.gpu_compile import KernelBuild

        if self._unavailable is not None:
            return EnvCompileResult(unavailable=self._unavailable)
        try:
            self._process.wait(timeout=_CHILD_TIMEOUT_S)
            stderr = read_stderr(self._folder.name)
            if self._process.returncode == _UNAVAILABLE_EXIT_CODE:
                return EnvCompileResult(unavailable=stderr.strip().splitlines()[-1])
            result = os.path.join(self._folder.name, "result.json")
            if not os.path.exists(result):
                raise RuntimeError(f"the GPU-compile child process failed (exit {self._process.returncode}):\n{stderr}")
            with open(result) as file:
                found = json.load(file)
        finally:
            self.cancel()
        return EnvCompileResult(
            builds=tuple(KernelBuild.from_dict(build) for build in found["builds"]),
            workload_errors=tuple(found["workload_errors"]),
        )

    def cancel(self) -> None:
        """Stop the child if it still runs, and remove its files."""
        if self._process is not None:
            stop_child(self._process)
        if self._folder is not None:
            self._folder.cleanup()
            self._folder = None


def start_gpu_compile(env, params: dict | None = None, precisions=None) -> PendingGpuCompile:
    """Start `compile_env_for_gpu`'s child process and return at once: the kit starts it
    before its other checks, so that NVVM works on one core while they run on the other.
    Arguments as `compile_env_for_gpu`."""
    from kernelgym.core.gpu_compile import extra_missing_reason

    missing = extra_missing_reason()
    if missing is not None:
        # the child runs this interpreter, with what it has installed: no need to start it (seconds) to be told
        return PendingGpuCompile(unavailable=missing)
    folder = tempfile.TemporaryDirectory(prefix="kernelgym-gpu-compile-")
    result = os.path.join(folder.name, "result.json")
    request = {"env": env, "params": params or {}, "precisions": None if precisions is None else list(precisions)}
    if _forkable():
        return PendingGpuCompile(fork_child(lambda: _compile_and_write(request, result), folder.name), folder)
    request_path = os.path.join(folder.name, "request.pickle")
    try:
        with open(request_path, "wb") as file:
            pickle.dump({**request, "env": transportable_env(env)}, file)
    except BaseException:
        folder.cleanup()
        raise
    # the simulator must be off in the child: it replaces numba.cuda and its compiler
    environment = {key: value for key, value in os.environ.items() if key != "NUMBA_ENABLE_CUDASIM"}
    process = start_child("kernelgym.envs.testing.gpu_compile", [request_path, result], folder.name, environment)
    return PendingGpuCompile(process, folder)


def _forkable() -> bool:
    """Whether a fork of this process is a child `LauncherRecorder.compile` can work in: safe to
    fork, numba's real CUDA target (not the simulator), and no launch made yet."""
    from kernelgym.core.backends import simulator_enabled
    from kernelgym.core.gpu_compile import all_launched_signatures

    return fork_refusal() is None and not simulator_enabled() and not all_launched_signatures()


def _compile_and_write(request: dict, result: str) -> None:
    """Run the env on cpu, compile its launchers, write the builds as JSON to ``result`` (exit
    code `_UNAVAILABLE_EXIT_CODE`, the reason on stderr, without NVIDIA's compilers)."""
    from kernelgym.core import gpu_compile

    reason = gpu_compile.toolchain_missing_reason()
    if reason is not None:
        # the child's report, not a diagnostic: the parent reads its last stderr line as the skip reason
        print(reason, file=sys.stderr)
        raise SystemExit(_UNAVAILABLE_EXIT_CODE)
    env = request["env"]
    if isinstance(env, str) and ":" in env:
        from kernelgym.envs.spec import load_reference

        env = load_reference(env)
    recorder = gpu_compile.LauncherRecorder()
    run_env_workloads(recorder, env, request["params"], keep_going=True, precisions=request["precisions"])
    builds = recorder.compile()
    write_json(
        result,
        {
            "builds": [dataclasses.asdict(build) for build in builds],
            "workload_errors": [f"{label}: {trace}" for label, trace in recorder.failures],
        },
    )


def check_gpu_compile(harness, config) -> str:
    """Every kernel the env launches compiles for sm_90a and sm_80 (NVIDIA's NVVM and ptxas),
    passes the PTX audit and fits its configured launch."""
    from kernelgym.envs.testing.report import CheckSkipped

    pending = harness.gpu_compile_started  # started by `check_env` before the other checks
    if pending is not None:
        harness.gpu_compile_started = None
        result = pending.result()
    else:
        result = compile_env_for_gpu(harness.importable or harness.spec, harness.overrides)
    if result.unavailable is not None:
        raise CheckSkipped(f"needs NVIDIA's compilers: {EXTRA_HINT} ({result.unavailable})")
    problems = [
        f"{build.kernel} for {build.target} with types {build.signature}:\n" + "\n".join(build.problems)
        for build in result.problems
    ]
    problems += [f"running the env on the cpu backend raised:\n{trace}" for trace in result.workload_errors]
    if problems:
        raise AssertionError(
            f"{len(problems)} kernel(s) do not compile for the GPU, fail the PTX audit or do not "
            f"fit their launch:\n\n" + "\n\n".join(problems)
        )
    if not result.builds:
        raise AssertionError("the env launched no kernel on the cpu backend, so nothing was compiled")
    heaviest = max(result.builds, key=lambda build: build.registers)
    spills = sum(build.spill_store_bytes + build.spill_load_bytes for build in result.builds)
    targets = sorted({build.target for build in result.builds})
    kernels = len({(build.kernel, build.signature) for build in result.builds})
    libdevice = sorted({call for build in result.builds for call in build.libdevice})
    occupancies = [build.occupancy for build in result.builds if build.occupancy is not None]
    return (
        f"{kernels} kernels for {', '.join(targets)}; most registers {heaviest.registers} "
        f"({heaviest.kernel}); {'no spills' if spills == 0 else f'{spills} bytes spilled'}; PTX audit clean"
        + (f"; libdevice: {', '.join(libdevice)}" if libdevice else "")
        + (f"; lowest occupancy {min(occupancies):.0%}" if occupancies else "")
        + (f"; {fast} opt-in fast-math builds" if (fast := sum(build.contracted for build in result.builds)) else "")
    )


def gpu_compile_test(harness, config) -> None:
    """`EnvTestSuite`'s ``test_gpu_compile``: the check, or a skip that warns with the install hint."""
    import pytest

    from kernelgym.envs.testing.report import CheckSkipped

    try:
        check_gpu_compile(harness, config)
    except CheckSkipped as skipped:
        # a warning too: pytest prints warnings without -r options, so the hint is seen
        warnings.warn(str(skipped), GpuCompileSkippedWarning, stacklevel=2)
        pytest.skip(str(skipped))


def _child(argv=None) -> int:
    """The started child process: run the env on cpu, compile its launchers, write the builds as JSON."""
    parser = argparse.ArgumentParser(description="internal: compile one env's kernels for the GPU")
    parser.add_argument("request")
    parser.add_argument("result")
    options = parser.parse_args(argv)
    with open(options.request, "rb") as file:
        request = pickle.load(file)
    _compile_and_write(request, options.result)  # (its SystemExit ends this process with its code)
    return 0


if __name__ == "__main__":
    sys.exit(_child())
