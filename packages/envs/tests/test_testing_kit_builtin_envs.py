"""Every built-in env passes every check of the kit (cpu; CartPole and Tag also in the simulator).

Few examples per check keep this suite quick; `kernelgym check ENV_ID` runs the
defaults (20 per check).
"""

from kernelgym.envs.testing import EnvTestSuite


class TestCartPole(EnvTestSuite):
    env_id = "CartPole-v1"
    backends = ("cpu", "sim", "cuda")
    max_examples = 4


class TestPendulum(EnvTestSuite):
    env_id = "Pendulum-v1"
    backends = ("cpu", "cuda")
    max_examples = 3


class TestMountainCar(EnvTestSuite):
    env_id = "MountainCar-v0"
    backends = ("cpu", "cuda")
    max_examples = 3


class TestAcrobot(EnvTestSuite):
    env_id = "Acrobot-v1"
    backends = ("cpu", "cuda")
    max_examples = 3


class TestTagGridWorld(EnvTestSuite):
    env_id = "TagGridWorld-v0"
    backends = ("cpu", "sim", "cuda")
    max_examples = 3


class TestTagContinuous(EnvTestSuite):
    env_id = "TagContinuous-v0"
    backends = ("cpu", "sim", "cuda")
    max_examples = 3


class TestTagGridWorldPartialObservation(EnvTestSuite):
    env_id = "TagGridWorld-v0"
    params = {"use_full_observation": False, "num_taggers": 3, "num_runners": 2}
    backends = ("cpu", "sim", "cuda")
    max_examples = 3
