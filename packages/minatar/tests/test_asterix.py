"""MinAtar Asterix under kernelgym's property-test kit (cpu and the CUDA simulator)."""

from kernelgym.envs.testing import EnvTestSuite


class TestAsterix(EnvTestSuite):
    env_id = "MinAtar-Asterix-v1"
    backends = ("cpu", "sim", "cuda")
    max_examples = 4
