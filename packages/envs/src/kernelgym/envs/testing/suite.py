"""`EnvTestSuite`: subclass it in a test module, name your env, get one test per check.

```python
from kernelgym.envs.testing import EnvTestSuite

class TestMyEnv(EnvTestSuite):
    env_id = "MyEnv-v0"          # or an EnvSpec
    max_examples = 20            # optional, per check
    params = {"goal": 5}         # optional param overrides
    precision = "float32"        # optional, for envs declaring EnvSpec.precisions
```

Each check of the kit is a test method, run once per backend in ``backends``: ``cpu``
always, ``sim`` (marked ``sim``) when ``NUMBA_ENABLE_CUDASIM=1`` was set before numba
was imported, ``cuda`` (marked ``gpu``) when a GPU is usable; an unavailable backend is
skipped with the reason. The ``kernelgym`` pytest plugin adds ``--kernelgym-backend``
and ``--kernelgym-max-examples`` to pick backends and examples from the command line.
"""

from __future__ import annotations

import pytest

from kernelgym.envs.testing import checks, long_horizon, order_check, per_env
from kernelgym.envs.testing.checks import CheckConfig
from kernelgym.envs.testing.gpu_compile import gpu_compile_test
from kernelgym.envs.testing.harness import EnvHarness, checking
from kernelgym.envs.testing.report import CheckSkipped
from kernelgym.envs.testing.runner import DEFAULT_MAX_EXAMPLES, unsafe_message

__all__ = ["EnvTestSuite"]

_BACKEND_MARKS = {"cpu": (), "sim": (pytest.mark.sim,), "cuda": (pytest.mark.gpu,)}


class EnvTestSuite:
    """Base class of a test class that property-tests one env (see the module docstring)."""

    env_id = None
    backends: tuple[str, ...] = ("cpu", "sim", "cuda")
    max_examples: int | None = None
    params: dict | None = None
    precision: str | None = None
    rtol: float = 1e-5
    atol: float = 1e-6

    def pytest_generate_tests(self, metafunc):
        # pytest calls this hook on the test class: one parametrization per backend
        if "kernelgym_backend" not in metafunc.fixturenames:
            return
        wanted = metafunc.config.getoption("kernelgym_backend", default=None)
        backends = [name for name in self.backends if not wanted or name in wanted]
        unknown = sorted(set(self.backends) - set(_BACKEND_MARKS))
        if unknown:
            raise ValueError(f"{type(self).__name__}.backends: unknown {unknown}; expected {sorted(_BACKEND_MARKS)}")
        metafunc.parametrize(
            "kernelgym_backend",
            [pytest.param(name, marks=_BACKEND_MARKS[name], id=name) for name in backends],
            scope="class",
        )

    @pytest.fixture(scope="class")
    @classmethod
    def kernelgym_harness(cls, kernelgym_backend) -> EnvHarness:
        """The env under test on one backend (built once per class and backend)."""
        if cls.env_id is None:
            raise TypeError(f"{cls.__name__}.env_id: expected an env id or an EnvSpec, got None")
        reason = _unavailable(kernelgym_backend)
        if reason:
            pytest.skip(reason)
        return EnvHarness(
            cls.env_id, kernelgym_backend, params=cls.params, rtol=cls.rtol, atol=cls.atol, precision=cls.precision
        )

    @pytest.fixture(scope="class")
    @classmethod
    def kernelgym_config(cls, kernelgym_harness, request) -> CheckConfig:
        """Examples per check: the command line's, the class's ``max_examples``, or the kit's default."""
        examples = request.config.getoption("kernelgym_max_examples", default=None) or cls.max_examples
        return CheckConfig(max_examples=examples or DEFAULT_MAX_EXAMPLES[kernelgym_harness.backend])

    def test_out_of_bounds(self, kernelgym_harness, kernelgym_config):
        with checking(kernelgym_harness.backend):
            checks.check_out_of_bounds(kernelgym_harness, kernelgym_config)

    def test_parity(self, kernelgym_harness, kernelgym_config):
        _run_safely(checks.check_parity, kernelgym_harness, kernelgym_config)

    def test_per_env_params(self, kernelgym_harness, kernelgym_config):
        try:
            _run_safely(per_env.check_per_env_params, kernelgym_harness, kernelgym_config)
        except CheckSkipped as skipped:
            pytest.skip(str(skipped))

    def test_determinism(self, kernelgym_harness, kernelgym_config):
        _run_safely(checks.check_determinism, kernelgym_harness, kernelgym_config)

    def test_batch_invariance(self, kernelgym_harness, kernelgym_config):
        _run_safely(checks.check_batch_invariance, kernelgym_harness, kernelgym_config)

    def test_no_cross_talk(self, kernelgym_harness, kernelgym_config):
        _run_safely(checks.check_no_cross_talk, kernelgym_harness, kernelgym_config)

    def test_agent_order(self, kernelgym_harness, kernelgym_config):
        try:
            _run_safely(order_check.check_agent_order, kernelgym_harness, kernelgym_config)
        except CheckSkipped as skipped:
            pytest.skip(str(skipped))

    def test_autoreset(self, kernelgym_harness, kernelgym_config):
        _run_safely(checks.check_autoreset, kernelgym_harness, kernelgym_config)

    def test_observations(self, kernelgym_harness, kernelgym_config):
        _run_safely(checks.check_observations, kernelgym_harness, kernelgym_config)

    def test_invariants(self, kernelgym_harness, kernelgym_config):
        _run_safely(checks.check_invariants, kernelgym_harness, kernelgym_config)

    def test_long_horizon(self, kernelgym_harness, kernelgym_config):
        _run_safely(long_horizon.check_long_horizon, kernelgym_harness, kernelgym_config)

    def test_invalid_actions(self, kernelgym_harness, kernelgym_config):
        _run_safely(checks.check_invalid_actions, kernelgym_harness, kernelgym_config)

    def test_stateful(self, kernelgym_harness, kernelgym_config):
        _run_safely(checks.check_stateful, kernelgym_harness, kernelgym_config)

    def test_gpu_compile(self, kernelgym_harness, kernelgym_config):
        gpu_compile_test(kernelgym_harness, kernelgym_config)


def _run_safely(check, harness: EnvHarness, config: CheckConfig) -> None:
    if harness.memory_unsafe:
        pytest.skip(unsafe_message(harness.backend))
    with checking(harness.backend):
        check(harness, config)


def _unavailable(backend: str) -> str | None:
    """Why ``backend`` cannot run in this process, or None."""
    from kernelgym.core import BackendUnavailableError, resolve_backend

    try:
        resolve_backend(backend)
    except BackendUnavailableError as error:
        return str(error)
    return None
