"""`Report` and `CheckResult`: what `check_env` found, and `format_report` to print it."""

from __future__ import annotations

import dataclasses
import platform

import numpy as np

__all__ = ["DEFAULT_MAX_EXAMPLES", "CheckResult", "CheckSkipped", "Report", "format_report"]

# Hypothesis examples per check (the simulator runs every thread as Python, so fewer);
# here, not in the runner, so that the command's --help reads it without importing numba.
DEFAULT_MAX_EXAMPLES = {"cpu": 20, "cuda": 20, "sim": 10}

PASSED, FAILED, ERROR, NOT_RUN, SKIPPED = "passed", "failed", "error", "not run", "skipped"


class CheckSkipped(Exception):
    """Raised by a check that cannot run here; the message says how to enable it."""


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """The outcome of one check.

    Attributes
    ----------
    name : str
    status : {"passed", "failed", "error", "not run", "skipped"}
        ``failed``: the env broke the property; ``error``: the check could not run
        (e.g. a kernel raised); ``not run``: an earlier finding made running it unsafe.
        ``skipped``: the check cannot run here (the message says how to enable it).
        Only ``passed`` counts as passing; a report passes with skipped checks.
    seconds : float
    message : str
        What went wrong (empty when passed).
    example : str
        The shrunk failing example, as hypothesis printed it (empty when passed).
    note : str
        A remark on a passed check (e.g. a part that does not apply to this env).
    """

    name: str
    status: str
    seconds: float
    message: str = ""
    example: str = ""
    note: str = ""

    @property
    def passed(self) -> bool:
        return self.status == PASSED


@dataclasses.dataclass(frozen=True)
class Report:
    """Everything `check_env` found about one env on one backend.

    Attributes
    ----------
    env_id, backend : str
    max_examples : int
        Hypothesis examples per check.
    seed : int
        Reproduces the run: ``check_env(..., seed=seed)`` / ``kernelgym check --seed``.
    results : tuple of CheckResult
    seconds : float
        Wall time of all checks (compilation included).
    precision : str or None
        The precision checked, or None for an env with no precision choice.
    fast_math : bool
        Whether the opt-in ``fast_math`` check ran.
    rtol, atol : float
        The tolerances of float comparisons with the reference (0: exact).
    params : dict
        The params overrides the run was given (``--param``), which the ``reproduce:``
        line repeats.
    source : str
        What ``kernelgym check`` takes back to reproduce the run: the env id, or the
        ``"module:attr"`` it was given (default: ``env_id``).
    """

    env_id: str
    backend: str
    max_examples: int
    seed: int
    results: tuple[CheckResult, ...]
    seconds: float
    precision: str | None = None
    fast_math: bool = False
    rtol: float = 0.0
    atol: float = 0.0
    params: dict = dataclasses.field(default_factory=dict)
    source: str = ""

    @property
    def passed(self) -> bool:
        """Whether every check passed (or was skipped, see `CheckResult`)."""
        return not self.failures

    @property
    def failures(self) -> tuple[CheckResult, ...]:
        return tuple(result for result in self.results if result.status not in (PASSED, SKIPPED))

    def __getitem__(self, name: str) -> CheckResult:
        for result in self.results:
            if result.name == name:
                return result
        raise KeyError(f"check name: expected one of {[r.name for r in self.results]}, got {name!r}")


def format_report(report: Report) -> str:
    """A readable text report: one line per check, then each failure with its shrunk example."""
    width = max((len(result.name) for result in report.results), default=10)
    verdict = "PASSED" if report.passed else f"FAILED ({len(report.failures)} of {len(report.results)} checks)"
    precision = report.precision or "none (env has no precision choice)"
    fast_math_note = ", fast-math build checked too" if report.fast_math else ""
    lines = [
        f"kernelgym check {report.env_id} on backend {report.backend!r}: {verdict}",
        f"  backend {report.backend}, precision {precision}{fast_math_note}; {report.max_examples} hypothesis "
        f"examples per check, seed {report.seed}, {report.seconds:.1f} s "
        f"(python {platform.python_version()}, {platform.machine()})",
        "  " + _guarantee(report),
    ]
    full = DEFAULT_MAX_EXAMPLES["cpu"]
    if report.backend == "sim" and report.max_examples < full:
        lines.append(
            f"  sim: {report.max_examples} examples per check, fewer than cpu's {full} "
            f"(rare bugs may pass; --max-examples {full} runs as many)"
        )
    lines.append("")
    for result in report.results:
        mark = {PASSED: "ok  ", FAILED: "FAIL", ERROR: "ERR ", NOT_RUN: "--  ", SKIPPED: "skip"}[result.status]
        line = f"  [{mark}] {result.name:<{width}}  {result.seconds:7.2f} s"
        if result.note:
            line += f"  ({result.note})"
        lines.append(line)
    for result in report.failures:
        if result.status == NOT_RUN:
            continue
        lines += ["", f"--- {result.name}: {result.status}", _indent(result.message)]
        if result.example:
            lines += ["  shrunk example:", _indent(result.example, 4)]
    skipped = [result.name for result in report.results if result.status == NOT_RUN]
    if skipped:
        lines += ["", f"not run: {', '.join(skipped)}: {report[skipped[0]].message}"]
    lines += [f"skipped: {result.name}: {result.message}" for result in report.results if result.status == SKIPPED]
    if not report.passed:
        fast_math = " --fast-math" if any(result.name == "fast_math" for result in report.results) else ""
        precision = f" --precision {report.precision}" if report.precision else ""
        lines += [
            "",
            f"reproduce: kernelgym check {report.source or report.env_id} --backend {report.backend} "
            f"--max-examples {report.max_examples} --seed {report.seed}{precision}{fast_math}"
            + "".join(f" --param {name}={format_param(value)}" for name, value in report.params.items()),
        ]
    return "\n".join(lines)


def format_param(value) -> str:
    """A param value as ``--param NAME=VALUE`` takes it back (`repr` of a float keeps every bit)."""
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value)).lower()
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    return repr(float(value))


def _guarantee(report: Report) -> str:
    """What "agrees with the reference" meant in this run, in one line."""
    exactly = "ints, bools and RNG stream rows exactly; replays, batch sizes and agent orders bitwise"
    if report.rtol == report.atol == 0.0:
        return f"compared with the reference: floats exactly (NaN equal to NaN), {exactly}"
    why = (
        "check_env's rtol/atol, by default the kit's CUDA_TOLERANCE: libdevice's transcendental functions "
        "differ from libm"
        if report.backend == "cuda"
        else "check_env's rtol/atol; 0 for exact"
    )
    return f"compared with the reference: floats within rtol {report.rtol:g}, atol {report.atol:g} ({why}), {exactly}"


def _indent(text: str, spaces: int = 2) -> str:
    return "\n".join(" " * spaces + line for line in text.splitlines())
