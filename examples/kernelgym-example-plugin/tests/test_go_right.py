"""GoRight-v0 under kernelgym's property-test kit: copy this file next to your own env.

Run it with ``python -m pytest tests`` once the plugin is installed (``pip install -e .``):
each check (exact parity with the reference, determinism, batch invariance, no cross
talk, autoreset, observations, invariants, invalid actions, out-of-bounds writes, a
stateful model test) runs on every backend listed; backends this machine lacks are
skipped with the reason.
"""

from kernelgym.envs.testing import EnvTestSuite


class TestGoRight(EnvTestSuite):
    env_id = "GoRight-v0"
    backends = ("cpu", "sim", "cuda")
    max_examples = 10


class TestGoRightAlwaysSlipping(EnvTestSuite):
    env_id = "GoRight-v0"
    params = {"slip": 1.0}
    backends = ("cpu",)
    max_examples = 5
