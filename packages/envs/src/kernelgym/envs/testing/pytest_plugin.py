"""The ``kernelgym`` pytest plugin: command-line options for `EnvTestSuite` classes.

Loaded by pytest in every run (entry point ``pytest11``), so it imports nothing but
pytest: the kit itself is imported by the test classes that use it.

Options
-------
--kernelgym-backend NAME
    Run `EnvTestSuite` tests on this backend only (repeatable): cpu, sim or cuda.
--kernelgym-max-examples N
    Hypothesis examples per check, overriding the classes' ``max_examples``.
"""

from __future__ import annotations

BACKENDS = ("cpu", "sim", "cuda")


def pytest_addoption(parser):
    group = parser.getgroup("kernelgym", "kernelgym env property tests (EnvTestSuite)")
    group.addoption(
        "--kernelgym-backend",
        action="append",
        choices=BACKENDS,
        default=None,
        dest="kernelgym_backend",
        help="run EnvTestSuite tests on this backend only (repeatable)",
    )
    group.addoption(
        "--kernelgym-max-examples",
        type=int,
        default=None,
        dest="kernelgym_max_examples",
        help="hypothesis examples per EnvTestSuite check",
    )


def pytest_configure(config):
    # EnvTestSuite marks its backends; register the marks for --strict-markers projects
    config.addinivalue_line("markers", "sim: runs kernels in Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1)")
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU; skipped when none is usable")
