"""`check_env`: run the kit's checks on one env and return a `Report`."""

from __future__ import annotations

import random
import time
import traceback

from hypothesis.errors import FlakyFailure

from kernelgym.envs.testing.beside import PendingCheck, start_beside
from kernelgym.envs.testing.checks import CHECKS, CheckConfig
from kernelgym.envs.testing.fast_math import FAST_MATH_CHECK
from kernelgym.envs.testing.gpu_compile import start_gpu_compile
from kernelgym.envs.testing.harness import EnvHarness, checking
from kernelgym.envs.testing.nonfinite import user_frame
from kernelgym.envs.testing.progress import compile_progress
from kernelgym.envs.testing.report import (
    DEFAULT_MAX_EXAMPLES,
    ERROR,
    FAILED,
    NOT_RUN,
    PASSED,
    SKIPPED,
    CheckResult,
    CheckSkipped,
    Report,
)

__all__ = ["DEFAULT_MAX_EXAMPLES", "check_env", "check_names"]


def check_names() -> list[str]:
    """The names of the kit's checks, in the order they run."""
    return [check.name for check in CHECKS]


def check_env(
    env,
    backend: str | None = "auto",
    max_examples: int | None = None,
    checks=None,
    seed: int | None = None,
    params: dict | None = None,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    precision: str | None = None,
    fast_math: bool = False,
    progress: bool = False,
) -> Report:
    """Property-test an env: every check of the kit, each a hypothesis search.

    Parameters
    ----------
    env : str or EnvSpec
        A registered env id, or an `EnvSpec` (which need not be registered).
    backend : {"auto", "cpu", "sim", "cuda"} or None
        ``sim`` needs ``NUMBA_ENABLE_CUDASIM=1`` set before numba is imported.
    max_examples : int, optional
        Hypothesis examples per check; default `DEFAULT_MAX_EXAMPLES` of the backend
        (20, 10 on ``sim``: the report then says it ran fewer than cpu).
    checks : iterable of str, optional
        Names of the checks to run (`check_names`, or the opt-in ``"fast_math"``);
        default all of `check_names`.
    seed : int, optional
        Seeds hypothesis; the report records the seed used, which reproduces the run.
    params : dict, optional
        Overrides of the env's params (as ``make(**params)``).
    rtol, atol : float
        Tolerances of floating-point comparisons with the CPU reference.
    precision : {"float64", "float32"} or None
        For an env that declares precisions (`EnvSpec.precisions`): the one to check
        (kernels and reference in it; None: the env's default).
    fast_math : bool
        Also run the opt-in ``fast_math`` check: the fast-math build (FMA contraction
        on) within its stated tolerance of the default build, proven on the cpu's
        FMA-contracting twin (`kernelgym.envs.testing.fast_math`).
    progress : bool
        Say on stderr when a check compiles the env's kernels (a first run takes
        minutes; later runs load them from the cache), with the seconds it took.

    Returns
    -------
    Report
        Per-check pass/fail, the shrunk failing example, and timings.

    Raises
    ------
    KeyError
        Unknown env id or check name.
    TypeError, ValueError
        Bad arguments, before any check runs.
    kernelgym.core.BackendUnavailableError
        The backend cannot run in this process.
    """
    selected = _select(checks)
    for name, value in (("fast_math", fast_math), ("progress", progress)):
        if not isinstance(value, bool):
            raise TypeError(f"{name}: expected True or False, got {type(value).__name__} {value!r}")
    if fast_math and FAST_MATH_CHECK not in selected:
        selected.append(FAST_MATH_CHECK)
    if max_examples is not None and (
        isinstance(max_examples, bool) or not isinstance(max_examples, int) or max_examples < 1
    ):
        raise ValueError(f"max_examples: expected None or an int >= 1, got {max_examples!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise ValueError(f"seed: expected None or an int >= 0, got {seed!r}")
    if params is not None and not isinstance(params, dict):
        raise TypeError(f"params: expected None or a dict of param overrides, got {type(params).__name__}")
    harness = EnvHarness(env, backend, params=params, rtol=rtol, atol=atol, precision=precision)
    examples = DEFAULT_MAX_EXAMPLES[harness.backend] if max_examples is None else max_examples
    seed = random.randrange(2**32) if seed is None else seed
    config = CheckConfig(max_examples=examples, seed=seed)
    started = time.perf_counter()
    results = []
    if any(check.name == "gpu_compile" for check in selected):
        # its child process (NVVM, on cpu launches that only record their types) works beside
        # the other checks instead of after them
        harness.gpu_compile_started = start_gpu_compile(harness.importable or harness.spec, harness.overrides)
    beside: dict = {}  # checks at work in child processes (`kernelgym.envs.testing.beside`)
    try:
        for index, check in enumerate(selected):
            if harness.memory_unsafe:
                results.append(CheckResult(check.name, NOT_RUN, 0.0, message=unsafe_message(harness.backend)))
                continue
            if check.name in beside:
                # its place in the report; collected after the checks run here, so that this
                # process never waits for a child while checks of its own remain
                results.append(beside[check.name])
                continue
            with compile_progress(harness.spec.id, harness.backend, check.name, enabled=progress):
                results.append(_run_one(check, harness, config))
            if index == 0:
                # the first check compiled the programs: the long ones load them in a child process
                beside = start_beside(selected[1:], harness, config, _run_one)
        results = [
            beside.pop(result.name).result() if isinstance(result, PendingCheck) else result for result in results
        ]
    finally:
        if harness.gpu_compile_started is not None:  # not collected: the check did not run
            harness.gpu_compile_started.cancel()
        for pending in beside.values():  # not collected: an earlier finding stopped the checks
            pending.cancel()
    return Report(
        harness.spec.id,
        harness.backend,
        examples,
        seed,
        tuple(results),
        time.perf_counter() - started,
        precision=harness.precision,
        fast_math=FAST_MATH_CHECK in selected,
        rtol=harness.rtol,
        atol=harness.atol,
        params=dict(params or {}),
        source=harness.importable or harness.spec.id,
    )


def _select(checks) -> list:
    if checks is None:
        return list(CHECKS)
    if isinstance(checks, str):
        checks = [checks]
    names = list(checks)
    known = {check.name: check for check in (*CHECKS, FAST_MATH_CHECK)}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise KeyError(f"checks: unknown check names {unknown}; expected names from {list(known)}")
    if not names:
        raise ValueError("checks: expected at least one check name, got none")
    # always in CHECKS order: out_of_bounds must run before checks it would make unsafe
    return [check for check in known.values() if check.name in names]


def unsafe_message(backend: str) -> str:
    return (
        f"not run: the kernels write out of bounds, which corrupts memory on the {backend} backend; "
        "fix out_of_bounds first (backend 'sim' runs every check safely)"
    )


def _run_one(check, harness, config) -> CheckResult:
    started = time.perf_counter()
    try:
        with checking(harness.backend):
            note = check.run(harness, config)
    except CheckSkipped as skipped:
        return CheckResult(check.name, SKIPPED, time.perf_counter() - started, message=str(skipped))
    except AssertionError as error:
        return CheckResult(check.name, FAILED, time.perf_counter() - started, _message(error), _example(error))
    except FlakyFailure as group:
        # the same input failed once and passed when replayed: itself a sign of an env
        # that is not deterministic, reported with the first failure
        first = group.exceptions[0]
        if not isinstance(first, AssertionError):
            raise
        message = _message(first) + "\n(this input did not fail every time: the env is not deterministic)"
        return CheckResult(
            check.name, FAILED, time.perf_counter() - started, message, _example(group) or _example(first)
        )
    except Exception as error:
        message = f"{type(error).__name__}: {error}\n" + _location(error)
        return CheckResult(check.name, ERROR, time.perf_counter() - started, message, _example(error))
    return CheckResult(check.name, PASSED, time.perf_counter() - started, note=note or "")


def _location(error: BaseException) -> str:
    """Where the error was raised (the innermost frame), to find the kernel or reference at fault,
    and the user's innermost line when that frame is numba's or the kit's (`user_frame`)."""
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return ""
    frame = frames[-1]
    where = f"raised at {frame.filename}:{frame.lineno} in {frame.name}"
    user = user_frame(error)
    if user is not None and not user.startswith(f"{frame.filename}:{frame.lineno} "):
        where += f", from your code at {user}"
    return where


def _message(error: BaseException) -> str:
    return str(error) or type(error).__name__


def _example(error: BaseException) -> str:
    """The failing example hypothesis attached to the exception (its notes)."""
    notes = getattr(error, "__notes__", None) or []
    return "\n".join(note for note in notes if note.strip())
