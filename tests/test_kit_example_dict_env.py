"""The property-test kit on the example plugin's Dict-observation env, found through its entry point.

GridGoal-v0 observes ``{"image": (2, 5, 5) uint8, "vector": (2,) float32}``; its kernels
write the leaves ``obs_image`` and ``obs_vector``, its reference returns the same dict.
"""

import kernelgym.envs as kge
from kernelgym.envs.testing import EnvTestSuite, check_env, format_report

ENV_ID = "GridGoal-v0"


def test_the_dict_env_is_registered_by_the_example_plugin():
    assert kge.get_spec(ENV_ID).distribution == "kernelgym-example-plugin"


class TestGridGoal(EnvTestSuite):
    env_id = ENV_ID
    backends = ("cpu", "sim", "cuda")
    max_examples = 4


def test_a_larger_grid_passes_the_fast_math_check_too():
    report = check_env(
        ENV_ID,
        backend="cpu",
        max_examples=3,
        seed=4,
        params={"size": 7},
        checks=["parity", "observations", "fast_math"],
    )
    assert report.passed, format_report(report)
