"""PointMass-v0, the continuous-action template, under kernelgym's property-test kit."""

from kernelgym.envs.testing import EnvTestSuite


class TestPointMass(EnvTestSuite):
    env_id = "PointMass-v0"
    backends = ("cpu", "sim", "cuda")
    max_examples = 5
