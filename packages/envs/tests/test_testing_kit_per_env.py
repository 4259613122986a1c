"""The kit's per_env_params check: per-env values from strategies, exact parity per env.

The envs are in kit_fixtures/drift.py: a correct drift with a per-env speed, and a copy
whose step hard-codes the default speed.
"""

import numpy as np
from hypothesis import given, settings

from kernelgym.envs.testing import check_env, check_names
from kernelgym.envs.testing.per_env import per_env_values
from kit_fixtures import drift

SEED = 20261126


def test_the_correct_env_passes_every_check_including_per_env_params():
    report = check_env(drift.SPEC, backend="cpu", max_examples=8, seed=SEED)
    assert report.passed, "\n".join(f"{r.name}: {r.message}\n{r.example}" for r in report.failures)
    assert "per_env_params" in check_names() and report["per_env_params"].status == "passed"


def test_a_param_the_kernel_ignores_is_found_only_with_per_env_values():
    report = check_env(
        drift.HARDCODED_SPEED, backend="cpu", max_examples=10, seed=SEED, checks=["parity", "per_env_params"]
    )
    assert report["parity"].status == "passed"  # at the default speed the literal is right
    result = report["per_env_params"]
    assert result.status == "failed"
    assert "differs from the reference built with its own params" in result.message
    assert "speed=" in result.message


def test_envs_without_per_env_params_skip_the_check():
    report = check_env("GoRight-v0", backend="cpu", max_examples=2, seed=SEED, checks=["per_env_params"])
    assert report["per_env_params"].status == "skipped"


@settings(max_examples=20, deadline=None)
@given(per_env_values(drift.DriftParams(), ("speed", "start"), 5))
def test_per_env_values_stay_within_a_fifth_of_the_default(values):
    assert set(values) == {"speed", "start"}
    assert np.all((values["speed"] >= 0.4 - 1e-12) & (values["speed"] <= 0.6 + 1e-12))
    assert values["start"].shape == (5,)
