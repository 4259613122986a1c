"""MinAtar Freeway under kernelgym's property-test kit (cpu and the CUDA simulator)."""

from kernelgym.envs.testing import EnvTestSuite


class TestFreeway(EnvTestSuite):
    env_id = "MinAtar-Freeway-v1"
    backends = ("cpu", "sim", "cuda")
    max_examples = 4
