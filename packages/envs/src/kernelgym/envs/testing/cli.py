"""``kernelgym check ENV_ID``: `main_check` runs `check_env` and prints the report."""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys

__all__ = ["PARAM_HELP", "main_check", "max_examples_help", "param_overrides", "precision_problem"]

PARAM_HELP = (
    "override a params field of the env, e.g. --param goal=5 (repeatable; ints, floats and "
    "true/false; the report's reproduce: line repeats them)"
)


def max_examples_help() -> str:
    """``--max-examples``'s help, from the kit's defaults (what a run without it uses)."""
    from kernelgym.envs.testing.report import DEFAULT_MAX_EXAMPLES

    return (
        f"hypothesis examples per check (default: {DEFAULT_MAX_EXAMPLES['cpu']}, {DEFAULT_MAX_EXAMPLES['sim']} "
        "on sim, whose report then says it ran fewer than cpu)"
    )


def precision_problem(spec, precision: str | None) -> str | None:
    """Why ``--precision precision`` does not fit ``spec`` (an argparse error text), or None."""
    if precision is None or precision in spec.precisions:
        return None
    if not spec.precisions:
        return (
            f"argument --precision: expected no --precision for {spec.id} (it declares no precision "
            f"choice: its EnvSpec.precisions is empty), received {precision!r}"
        )
    return f"argument --precision: expected one of {list(spec.precisions)} for {spec.id}, received {precision!r}"


def param_overrides(spec, texts) -> dict:
    """``--param NAME=VALUE`` texts as ``make(**overrides)`` keywords, each VALUE read as its field's type.

    Raises
    ------
    ValueError
        A text that is not ``NAME=VALUE``, a name that is no int, float or bool field of
        the env's params, a field given twice, or a value its field's type cannot read;
        the message names ``--param``, what was expected and what was received.
    """
    import numpy as np

    fields = (
        {}
        if spec.params is None
        else {field.name: getattr(spec.params, field.name) for field in dataclasses.fields(spec.params)}
    )
    scalars = sorted(
        name for name, value in fields.items() if isinstance(value, (bool, int, float, np.bool_, np.number))
    )
    overrides: dict = {}
    for text in texts:
        name, equals, raw = text.partition("=")
        name = name.strip()
        if not equals or not name:
            raise ValueError(f"argument --param: expected NAME=VALUE, received {text!r}")
        if name not in scalars:
            raise ValueError(
                f"argument --param: expected a scalar params field of {spec.id} (one of {scalars}), received {name!r}"
            )
        if name in overrides:
            raise ValueError(f"argument --param: expected each field once, received {name!r} twice")
        overrides[name] = _read_param(name, fields[name], raw.strip())
    return overrides


def _read_param(name: str, default, raw: str):
    import numpy as np

    if isinstance(default, (bool, np.bool_)):
        if raw.lower() not in ("true", "false"):
            raise ValueError(f"argument --param: expected {name}=true or {name}=false, received {name}={raw}")
        return raw.lower() == "true"
    kind = int if isinstance(default, (int, np.integer)) else float
    try:
        return kind(raw)
    except ValueError:
        raise ValueError(f"argument --param: expected {name}=<{kind.__name__}>, received {name}={raw}") from None


def _parser() -> argparse.ArgumentParser:
    from kernelgym.envs.spec import PRECISIONS
    from kernelgym.envs.testing.runner import check_names

    parser = argparse.ArgumentParser(
        prog="kernelgym check",
        description="Property-test kernelgym envs against their CPU reference (hypothesis).",
    )
    parser.add_argument(
        "env_ids",
        nargs="+",
        metavar="ENV_ID",
        help="registered env ids, or 'module:attr' of an EnvSpec not registered yet",
    )
    parser.add_argument(
        "--backend",
        default="auto",
        choices=["auto", "cpu", "sim", "cuda"],
        help="where the kernels run (default: auto, i.e. cuda if a GPU is usable, else cpu; "
        "sim re-runs the check under NUMBA_ENABLE_CUDASIM=1)",
    )
    parser.add_argument("--max-examples", type=int, default=None, help=max_examples_help())
    parser.add_argument(
        "--checks", default=None, help=f"comma-separated subset of: {','.join(check_names())}, or the opt-in fast_math"
    )
    parser.add_argument("--seed", type=int, default=None, help="reproduce a run (the report prints its seed)")
    parser.add_argument(
        "--precision",
        default=None,
        choices=list(PRECISIONS),
        help="for envs that declare the choice (default: the env's own)",
    )
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help=PARAM_HELP)
    parser.add_argument(
        "--fast-math",
        action="store_true",
        help="also check the fast-math build (FMA contraction on) against its stated tolerance, "
        "on the cpu's FMA-contracting twin",
    )
    return parser


def main_check(argv=None) -> int:
    """Check the given env ids, print a report for each, and return 0 if all passed else 1.

    Parameters
    ----------
    argv : list of str, optional
        Arguments after ``kernelgym check`` (default ``sys.argv[1:]``), e.g.
        ``["CartPole-v1", "--backend", "cpu", "--max-examples", "20"]``.

    Returns
    -------
    int
        The process exit code: 0 every check passed, 1 otherwise.
    """
    parser = _parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    _check_precision(parser, args.env_ids, args.precision)
    if args.backend == "sim" and not _simulator_on():
        return _rerun_in_simulator(argv)
    from kernelgym.core import BackendUnavailableError
    from kernelgym.envs.testing.report import format_report
    from kernelgym.envs.testing.runner import check_env

    checks = None if args.checks is None else [name.strip() for name in args.checks.split(",") if name.strip()]
    exit_code = 0
    for env_id in args.env_ids:
        try:
            overrides = param_overrides(_spec(_env(env_id)), args.param)
            report = check_env(
                env_id,  # an id or "module:attr", which the report gives back
                params=overrides or None,
                backend=args.backend,
                max_examples=args.max_examples,
                checks=checks,
                seed=args.seed,
                precision=args.precision,
                fast_math=args.fast_math,
                progress=True,
            )
        except (ImportError, AttributeError, KeyError, TypeError, ValueError, BackendUnavailableError) as error:
            message = error.args[0] if isinstance(error, KeyError) and error.args else error
            print(f"kernelgym check {env_id}: {message}", file=sys.stderr)
            exit_code = 1
            continue
        print(format_report(report), flush=True)
        if not report.passed:
            exit_code = 1
    return exit_code


def _check_precision(parser: argparse.ArgumentParser, env_ids, precision: str | None) -> None:
    """Exit with code 2 if an env does not declare ``--precision`` (an env that fails to load is
    reported by the check loop)."""
    if precision is None:
        return
    from kernelgym.envs.registry import get_spec
    from kernelgym.envs.spec import EnvSpec

    for env_id in env_ids:
        try:
            spec = _env(env_id)
            spec = get_spec(spec) if isinstance(spec, str) else spec
        except (ImportError, AttributeError, KeyError, TypeError, ValueError):
            continue
        problem = precision_problem(spec, precision) if isinstance(spec, EnvSpec) else None
        if problem:
            parser.error(problem)


def _spec(env):
    """The `EnvSpec` of a registered id, or ``env`` itself (an imported spec)."""
    if isinstance(env, str):
        from kernelgym.envs.registry import get_spec

        return get_spec(env)
    return env


def _env(env_id: str):
    """A registered id as is; ``"module:attr"`` imported (an author's spec before it is registered)."""
    if ":" not in env_id:
        return env_id
    from kernelgym.envs.spec import load_reference

    return load_reference(env_id)


def _simulator_on() -> bool:
    if "numba" in sys.modules:
        from kernelgym.core.backends import simulator_enabled

        return simulator_enabled()
    return os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"


def _rerun_in_simulator(argv) -> int:
    """The simulator must be on before numba is imported: run the check in a child process that sets it."""
    print(
        "kernelgym check: backend 'sim' needs NUMBA_ENABLE_CUDASIM=1 before numba is imported; "
        "running the check in a child process with it set",
        file=sys.stderr,
        flush=True,
    )
    environment = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    arguments = sys.argv[1:] if argv is None else list(argv)
    command = [sys.executable, "-m", "kernelgym.envs.testing.cli", *arguments]
    return subprocess.run(command, env=environment, check=False).returncode


if __name__ == "__main__":
    from kernelgym.core.process_exit import exit_process

    exit_process(main_check())
