"""A bad action is refused before the step program compiles (issue 36: check actions before
compiling): the env's step builds at its first launch, after the action check."""

import gymnasium
import numpy as np
import pytest

import kernelgym.envs as kge


def _step_built(env) -> bool:
    return all(launch.built for launch in env._step_launch.launches)


@pytest.mark.parametrize("action", [np.array([0.7, 0.7, 0.7]), np.array([0.0, 1.0, 0.0])])
def test_a_float_action_to_a_discrete_env_is_refused_before_its_step_compiles(action):
    env = kge.make("CartPole-v1", 3, backend="cpu", seed=0)
    try:
        env.reset(seed=0)
        before = env.get_state()
        with pytest.raises(TypeError, match=r"actions: .*float64"):
            env.step(action)
        assert not _step_built(env)  # refused before the build, not after it
        assert all(np.array_equal(env.get_state()[name], value) for name, value in before.items())
        obs = env.step(np.array([0, 1, 0]), numpy=True)[0]
        assert _step_built(env) and obs.shape == (3, 4)
    finally:
        env.close()


def test_make_vec_refuses_a_float_action_before_the_step_compiles():
    envs = gymnasium.make_vec("kernelgym/CartPole-v1", num_envs=2, vectorization_mode="vector_entry_point")
    try:
        envs.reset(seed=0)
        with pytest.raises(TypeError, match="actions"):
            envs.step(np.array([0.7, 0.7]))
        assert not _step_built(envs.unwrapped.env if hasattr(envs.unwrapped, "env") else envs.unwrapped)
    finally:
        envs.close()
