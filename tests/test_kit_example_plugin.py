"""The property-test kit on the example plugin's env, found through its entry point.

GoRight-v0 slips at random (probability ``slip``) inside its step. Its reference draws
the slips from the env's own ``kernelgym.core.rng`` stream, as the kernel does, so the
kit compares every transition exactly, slips included (and slip-free corridors too).
"""

import kernelgym.envs as kge
from kernelgym.envs.testing import EnvTestSuite, check_env, format_report, main_check

ENV_ID = "GoRight-v0"


def test_example_env_is_registered_by_its_plugin():
    spec = kge.get_spec(ENV_ID)
    assert spec.distribution == "kernelgym-example-plugin"


class TestGoRight(EnvTestSuite):
    env_id = ENV_ID
    backends = ("cpu", "sim", "cuda")
    max_examples = 6


class TestGoRightWithoutSlips(EnvTestSuite):
    env_id = ENV_ID
    params = {"slip": 0.0}
    backends = ("cpu", "sim", "cuda")
    max_examples = 6


def test_always_slipping_corridor_passes_too():
    # slip=1: every move reversed, deterministic again
    report = check_env(ENV_ID, backend="cpu", max_examples=4, seed=1, params={"slip": 1.0})
    assert report.passed, format_report(report)


def test_kernelgym_check_command_on_the_example_env(capsys):
    assert main_check([ENV_ID, "--backend", "cpu", "--max-examples", "4", "--seed", "2"]) == 0
    out = capsys.readouterr().out
    assert f"kernelgym check {ENV_ID} on backend 'cpu': PASSED" in out
