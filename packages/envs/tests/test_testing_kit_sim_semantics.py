"""The simulator computes what the compiled kernels compute, so the kit reports the same on both.

kit_fixtures/clip_push.py: the clip pattern ``min(max(u, -1.0), 1.0)`` on a float32 action
(the simulator once made it float32 on one branch, and the kit then said a clipped action
was not clipped), and a planted ``math.sqrt`` of a negative (NaN compiled; the simulator
raised ``ValueError`` before).
"""

import inspect

import numpy as np
import pytest

from kernelgym.envs.testing import check_env, format_report
from kit_fixtures import clip_push

SEED = 20261128


def _sqrt_site() -> str:
    function = clip_push.step_sqrt_of_negative.py_func
    lines, first = inspect.getsourcelines(function)
    offset = next(k for k, line in enumerate(lines) if clip_push.SQRT_LINE in line)
    return f"{inspect.getsourcefile(function)}:{first + offset}"


def _assert_sqrt_located(backend: str, max_examples: int) -> None:
    report = check_env(
        clip_push.SQRT_OF_NEGATIVE, backend=backend, max_examples=max_examples, seed=SEED, checks=["observations"]
    )
    result = report["observations"]
    # failed (a NaN found), not error (a ValueError raised in a simulator thread)
    assert result.status == "failed", result.message
    assert f"NaN/inf arises in step_sqrt_of_negative at {_sqrt_site()}" in result.message, result.message


def test_a_square_root_of_a_negative_is_a_nan_the_kit_locates_on_cpu():
    _assert_sqrt_located("cpu", 5)


@pytest.mark.sim
def test_a_square_root_of_a_negative_is_a_nan_the_kit_locates_in_the_simulator():
    _assert_sqrt_located("sim", 5)


@pytest.mark.sim
def test_the_clip_pattern_passes_in_the_simulator():
    report = check_env(
        clip_push.SPEC, backend="sim", max_examples=6, seed=SEED, checks=["parity", "invalid_actions", "observations"]
    )
    assert report.passed, format_report(report)


@pytest.mark.sim
def test_the_simulator_and_the_cpu_give_the_same_bits_with_clipped_actions():
    from kernelgym.envs.vector_env import KernelVectorEnv

    generator = np.random.default_rng(SEED)
    envs = [KernelVectorEnv(clip_push.SPEC, 5, backend=backend, seed=SEED) for backend in ("cpu", "sim")]
    for env in envs:
        env.reset(seed=SEED)
    for _ in range(6):
        # half the actions outside the Box, which the kernel clips with min/max
        actions = generator.uniform(-2.0, 2.0, size=(5, 1)).astype(np.float32)
        cpu, sim = (env.step(actions, numpy=True) for env in envs)
        for name, left, right in zip(("obs", "rewards"), cpu[:2], sim[:2]):
            assert np.asarray(left).tobytes() == np.asarray(right).tobytes(), (name, left, right)
        assert envs[0].get_state()["speed"].tobytes() == envs[1].get_state()["speed"].tobytes()


@pytest.mark.sim
def test_a_simulator_out_of_bounds_write_is_reported_at_the_kernel_line():
    from kit_fixtures import walk

    function = walk.step_off_by_one.py_func
    lines, first = inspect.getsourcelines(function)
    line = first + next(k for k, text in enumerate(lines) if "obs[i, past] = energy[i]" in text)
    report = check_env(walk.OFF_BY_ONE, backend="sim", max_examples=3, seed=SEED, checks=["out_of_bounds"])
    result = report["out_of_bounds"]
    assert result.status == "failed", result.message
    # the simulator raises in numba's devicearray.py; the report names the kernel's line
    site = f"at {inspect.getsourcefile(function)}:{line} in step_off_by_one: `obs[i, past] = energy[i]`"
    assert site in result.message, result.message
