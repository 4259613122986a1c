"""GridGoal-v0 (a Dict observation: an image and a vector) under kernelgym's property-test kit."""

from kernelgym.envs.testing import EnvTestSuite


class TestGridGoal(EnvTestSuite):
    env_id = "GridGoal-v0"
    backends = ("cpu", "sim", "cuda")
    max_examples = 10
