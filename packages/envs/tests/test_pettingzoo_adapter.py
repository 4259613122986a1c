"""The PettingZoo ParallelEnv adapter passes PettingZoo's own API test."""

import numpy as np
import pytest

pytest.importorskip("pettingzoo", reason="the optional extra kernelgym-envs[pettingzoo] is not installed")

# The multi-agent test env "LineWalk-v0" and its plugin registration live there.
import test_vector_env_multiagent as linewalk
from pettingzoo.test import parallel_api_test

import kernelgym.envs as kge
from kernelgym.envs.pettingzoo_adapter import KernelParallelEnv


def test_parallel_api_test_passes_on_a_multi_agent_env():
    env = KernelParallelEnv(linewalk.ENV_ID, seed=0)
    parallel_api_test(env, num_cycles=200)


@pytest.mark.parametrize("env_id", [env_id for env_id in ("TagGridWorld-v0", "TagContinuous-v0")])
def test_parallel_api_test_passes_on_the_tag_envs(env_id):
    if env_id not in kge.list_envs():
        pytest.fail(f"{env_id} is not registered (its module failed to load?)")
    env = KernelParallelEnv(env_id, seed=0)
    parallel_api_test(env, num_cycles=150)


def test_episode_flow_and_dict_outputs():
    env = KernelParallelEnv(linewalk.ENV_ID, seed=0, num_agents=2, length=3)
    assert env.possible_agents == ["agent_0", "agent_1"]
    observations, infos = env.reset(seed=0)
    assert set(observations) == set(infos) == {"agent_0", "agent_1"}
    np.testing.assert_allclose(observations["agent_1"], [2 / 3, 1 / 2])
    # walker 0 starts at 1: one step left ends the episode for every agent
    observations, rewards, terminations, truncations, infos = env.step({"agent_0": 0, "agent_1": 2})
    assert rewards == {"agent_0": 1.0, "agent_1": 0.0}
    assert terminations == {"agent_0": True, "agent_1": True}
    assert truncations == {"agent_0": False, "agent_1": False}
    assert env.agents == []
    with pytest.raises(RuntimeError, match="reset"):
        env.step({"agent_0": 0, "agent_1": 0})
    env.reset()
    with pytest.raises(KeyError, match="missing"):
        env.step({"agent_0": 0})
    with pytest.raises(ValueError, match="actions"):
        env.step({"agent_0": 0, "agent_1": 5})
    with pytest.raises(KeyError, match="agent"):
        env.observation_space("agent_9")


def test_render_mode_rgb_array_uses_the_env_renderer():
    env = KernelParallelEnv(linewalk.ENV_ID, seed=0, render_mode="rgb_array")
    env.reset()
    frame = env.render()
    assert frame.dtype == np.uint8 and frame.ndim == 3
