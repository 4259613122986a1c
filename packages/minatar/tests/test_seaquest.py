"""MinAtar Seaquest under kernelgym's property-test kit (cpu and the CUDA simulator)."""

from kernelgym.envs.testing import EnvTestSuite


class TestSeaquest(EnvTestSuite):
    env_id = "MinAtar-Seaquest-v1"
    backends = ("cpu", "sim", "cuda")
    max_examples = 4
