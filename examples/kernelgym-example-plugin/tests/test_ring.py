"""Ring-v0, the multi-agent template, under kernelgym's property-test kit.

Besides the checks every env gets, an agent-layout env gets the agent-order check: its
kernels must give the same bits whatever order an env's agents run in (on a GPU they run
concurrently), and each agent must draw only from its own stream.
"""

from kernelgym.envs.testing import EnvTestSuite


class TestRing(EnvTestSuite):
    env_id = "Ring-v0"
    backends = ("cpu", "sim", "cuda")
    max_examples = 5


class TestRingOfThreeNoiseless(EnvTestSuite):
    env_id = "Ring-v0"
    params = {"num_agents": 3, "noise": 0.0}
    backends = ("cpu",)
    max_examples = 3
