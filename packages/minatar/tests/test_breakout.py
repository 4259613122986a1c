"""MinAtar Breakout under kernelgym's property-test kit (cpu and the CUDA simulator)."""

from kernelgym.envs.testing import EnvTestSuite


class TestBreakout(EnvTestSuite):
    env_id = "MinAtar-Breakout-v1"
    backends = ("cpu", "sim", "cuda")
    max_examples = 4


class TestBreakoutFullActionSet(EnvTestSuite):
    env_id = "MinAtar-Breakout-v0"
    backends = ("cpu",)
    max_examples = 5
    # the options test_against_original's "changed" set uses: one build serves both (CI time)
    params = {"sticky_action_prob": 0.5, "difficulty_ramping": False}
