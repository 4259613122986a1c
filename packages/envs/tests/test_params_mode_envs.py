"""Built-in envs give the same bits with their params compiled in (the default) and passed as
launcher arguments (``KERNELGYM_PARAMS=arguments``, which the envs, minatar and sim tox envs
use so that their many configurations share compiles)."""

import numpy as np
import pytest

import kernelgym.envs as kge


def _rollout(env_id, mode, params, steps=40):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KERNELGYM_PARAMS", mode)  # read when the env binds its launches
        env = kge.make(env_id, num_envs=8, backend="cpu", **params)
    try:
        outputs = [env.reset(seed=7)[0]]
        env.action_space.seed(3)
        for _ in range(steps):
            outputs.extend(env.step(env.action_space.sample())[:4])
        outputs.append(env.get_state())
        return outputs
    finally:
        env.close()


def _arrays(item):
    if isinstance(item, dict):
        return [array for key in sorted(item) for array in _arrays(item[key])]
    return [np.asarray(item)]


@pytest.mark.parametrize(
    ("env_id", "params"),
    [("CartPole-v1", {"length": 0.7, "force_mag": 12.5}), ("Pendulum-v1", {"max_speed": 7.0})],
)
def test_params_as_arguments_give_the_bits_of_params_as_constants(env_id, params):
    frozen = [array for item in _rollout(env_id, "constants", params) for array in _arrays(item)]
    passed = [array for item in _rollout(env_id, "arguments", params) for array in _arrays(item)]
    assert len(frozen) == len(passed)
    for left, right in zip(frozen, passed):
        assert left.dtype == right.dtype and left.shape == right.shape
        assert left.tobytes() == right.tobytes()
