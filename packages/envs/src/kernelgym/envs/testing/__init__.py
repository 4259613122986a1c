"""Property tests for kernelgym envs: one function, one test class, or one command.

.. code-block:: python

    from kernelgym.envs.testing import check_env, format_report

    report = check_env("MyEnv-v0", backend="cpu", max_examples=20)
    print(format_report(report))          # or: kernelgym check MyEnv-v0

    # in a test module (pytest):
    from kernelgym.envs.testing import EnvTestSuite

    class TestMyEnv(EnvTestSuite):
        env_id = "MyEnv-v0"

Every check is a hypothesis property of the env's kernels against its CPU reference
(``EnvSpec.reference``): one-step parity, determinism, batch invariance, no cross-talk
between envs, autoreset semantics, observation bounds, the spec's invariants, invalid
actions, out-of-bounds writes and a stateful random walk over reset/step/set_state.
"""

from kernelgym.envs.testing.checks import CHECKS, Check, CheckConfig
from kernelgym.envs.testing.cli import main_check
from kernelgym.envs.testing.harness import EnvHarness
from kernelgym.envs.testing.report import CheckResult, Report, format_report
from kernelgym.envs.testing.runner import DEFAULT_MAX_EXAMPLES, check_env, check_names

__all__ = [
    "CHECKS",
    "Check",
    "CheckConfig",
    "CheckResult",
    "DEFAULT_MAX_EXAMPLES",
    "EnvHarness",
    "EnvTestSuite",
    "Report",
    "check_env",
    "check_names",
    "format_report",
    "main_check",
]


def __getattr__(name):
    # EnvTestSuite needs pytest, which only test runs have: import it on first use.
    if name == "EnvTestSuite":
        from kernelgym.envs.testing.suite import EnvTestSuite

        return EnvTestSuite
    raise AttributeError(f"module 'kernelgym.envs.testing' has no attribute {name!r}")
