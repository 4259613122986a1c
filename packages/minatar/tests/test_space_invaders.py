"""MinAtar SpaceInvaders under kernelgym's property-test kit (cpu and the CUDA simulator)."""

from kernelgym.envs.testing import EnvTestSuite


class TestSpaceInvaders(EnvTestSuite):
    env_id = "MinAtar-SpaceInvaders-v1"
    backends = ("cpu", "sim", "cuda")
    max_examples = 4
