"""A tiny multi-agent env (agent-layout kernel) run by KernelVectorEnv.

"LineWalk-v0": ``num_agents`` walkers on the integer line [0, length]; each picks
left / stay / right. A walker at 0 earns 1 per step; the episode ends when walker 0
reaches 0. ``moves`` counts the env's moves through ``atomic_add`` (several agents
write it) and is restored to 0 on reset by the runtime (``restore_on_reset``).
The PettingZoo adapter tests reuse this env.
"""

import dataclasses
import sys

import numpy as np
import pytest
import torch
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st

import kernelgym.envs as kge
from kernelgym.core import agent_kernel, atomic_add, device_function
from kernelgym.envs import CPUReference, EnvSpec, StateArray, hookimpl

ENV_ID = "LineWalk-v0"
MODULE = __name__


@dataclasses.dataclass(frozen=True)
class LineWalkParams:
    num_agents: int = 3
    length: int = 4

    def __post_init__(self):
        if self.num_agents < 1 or self.length < 1:
            raise ValueError(f"LineWalkParams: expected num_agents >= 1 and length >= 1, got {self}")


@agent_kernel
def step(env, agent, num_agents, actions, obs, rewards, terminated, position, moves, length):
    move = actions[env, agent] - 1
    new_position = min(max(position[env, agent] + move, 0), length)
    if new_position != position[env, agent]:
        atomic_add(moves, env, 1)
    position[env, agent] = new_position
    rewards[env, agent] = 1.0 if new_position == 0 else 0.0
    if agent == 0:
        terminated[env] = new_position == 0
    observe(env, agent, num_agents, obs, position, length)


@agent_kernel
def reset(env, agent, num_agents, obs, position, length):
    position[env, agent] = (agent + 1) % (length + 1)
    observe(env, agent, num_agents, obs, position, length)


@device_function
def observe(env, agent, num_agents, obs, position, length):
    obs[env, agent, 0] = position[env, agent] / length
    obs[env, agent, 1] = agent / num_agents


def _reference_reset(params, rng_states=None):
    position = np.array([(agent + 1) % (params.length + 1) for agent in range(params.num_agents)], dtype=np.int32)
    return {"position": position, "moves": np.int32(0).reshape(())}


def _reference_step(params, state, action, rng_states=None):
    new_position = np.clip(state["position"] + np.asarray(action) - 1, 0, params.length).astype(np.int32)
    moves = state["moves"] + np.int32(np.count_nonzero(new_position != state["position"]))
    rewards = (new_position == 0).astype(np.float32)
    return {"position": new_position, "moves": np.int32(moves).reshape(())}, rewards, bool(new_position[0] == 0)


def _reference_observe(params, state):
    agents = np.arange(params.num_agents, dtype=np.float32)
    return np.stack([state["position"] / np.float32(params.length), agents / params.num_agents], axis=1).astype(
        np.float32
    )


reference = CPUReference(_reference_reset, _reference_step, _reference_observe)


def render(state, index, params):
    picture = np.zeros((8, 8 * (params.length + 1), 3), dtype=np.uint8)
    for position in state["position"][index]:
        picture[:, 8 * position : 8 * position + 8] = 255
    return picture


SPEC = EnvSpec(
    id=ENV_ID,
    observation_space=spaces.Box(0.0, 1.0, (2,), np.float32),
    action_space=spaces.Discrete(3),
    state=(
        StateArray("position", np.int32, per_agent=True),
        StateArray("moves", np.int32, restore_on_reset=True),
    ),
    step_kernel=f"{MODULE}:step",
    reset_kernel=f"{MODULE}:reset",
    reference=f"{MODULE}:reference",
    params=LineWalkParams(),
    num_agents=lambda params: params.num_agents,
    max_episode_steps=6,
    kernel_layout="agent",
    render=f"{MODULE}:render",
    description="walkers on a line (test env)",
)


@hookimpl
def kernelgym_register_envs():
    return [SPEC]


kge.register_plugin(sys.modules[__name__], name="linewalk-test-plugin")


def test_multi_agent_shapes_and_spaces():
    env = kge.make(ENV_ID, 5, backend="cpu", seed=0, num_agents=4)
    assert env.num_agents == 4
    obs, _ = env.reset()
    assert obs.shape == (5, 4, 2) and obs.dtype == torch.float32
    assert env.observation_space.shape == (5, 4, 2)
    assert env.action_space.shape == (5, 4)
    obs, rewards, terminated, truncated, _ = env.step(torch.ones((5, 4), dtype=torch.int64))
    assert rewards.shape == (5, 4) and rewards.dtype == torch.float32
    assert terminated.shape == truncated.shape == (5,)
    with pytest.raises(ValueError, match="shape"):
        env.step(torch.ones((5,), dtype=torch.int64))
    single = kge.make(ENV_ID, 2, backend="cpu", seed=0, num_agents=1)  # the agent axis stays
    assert single.multi_agent and single.reset()[0].shape == (2, 1, 2)
    assert single.step(torch.ones((2, 1), dtype=torch.int64))[1].shape == (2, 1)


@settings(max_examples=15)
@given(
    actions=st.lists(
        st.lists(st.lists(st.integers(0, 2), min_size=3, max_size=3), min_size=4, max_size=4), min_size=1, max_size=20
    )
)
def test_multi_agent_env_follows_reference_with_autoreset(actions):
    """Rewards, counters (atomic adds), termination, truncation and NEXT_STEP resets."""
    params = LineWalkParams()
    env = kge.make(ENV_ID, 4, backend="cpu", seed=0)
    env.reset()
    states = [reference.reset(params) for _ in range(4)]
    pending_reset = [False] * 4
    steps = [0] * 4
    for batch in actions:
        obs, rewards, terminated, truncated, _ = env.step(np.array(batch, dtype=np.int64), numpy=True)
        got = env.get_state()
        for index in range(4):
            if pending_reset[index]:
                states[index] = reference.reset(params)
                expected_rewards, expected_terminated, expected_truncated = np.zeros(3, np.float32), False, False
                steps[index] = 0
            else:
                states[index], expected_rewards, expected_terminated = reference.step(
                    params, states[index], batch[index]
                )
                steps[index] += 1
                expected_truncated = steps[index] >= SPEC.max_episode_steps
            np.testing.assert_array_equal(got["position"][index], states[index]["position"])
            assert got["moves"][index] == states[index]["moves"]
            np.testing.assert_allclose(obs[index], reference.observe(params, states[index]))
            np.testing.assert_array_equal(rewards[index], expected_rewards)
            assert terminated[index] == expected_terminated and truncated[index] == expected_truncated
            pending_reset[index] = expected_terminated or expected_truncated


def test_restore_on_reset_also_in_same_step_mode():
    env = kge.make(ENV_ID, 2, backend="cpu", seed=0, autoreset_mode="same_step")
    env.reset()
    right = np.full((2, 3), 2, dtype=np.int64)
    left = np.zeros((2, 3), dtype=np.int64)
    env.step(right)
    assert env.get_state()["moves"].tolist() == [3, 3]  # every walker moved one cell right
    _, _, terminated, _, info = env.step(left)  # walker 0 goes 2 -> 1
    _, _, terminated, _, info = env.step(left)  # 1 -> 0: the episode ends, reset in the same step
    assert terminated.tolist() == [True, True]
    assert info["_final_obs"].tolist() == [True, True]
    assert info["final_obs"][0, 0, 0].item() == 0.0
    state = env.get_state()
    assert state["moves"].tolist() == [0, 0]
    assert state["position"].tolist() == [[1, 2, 3]] * 2


def test_render_delegates_to_the_env_renderer():
    env = kge.make(ENV_ID, 2, backend="cpu", seed=0)
    env.reset()
    picture = env.render(1)
    assert picture.dtype == np.uint8 and picture.shape == (8, 40, 3)
    assert picture[:, 8:16].min() == 255 and picture[:, :8].max() == 0
    with pytest.raises(IndexError, match="index"):
        env.render(2)


@pytest.mark.sim
def test_agent_kernel_in_simulator_matches_cpu():
    cpu = kge.make(ENV_ID, 4, backend="cpu", seed=0)
    sim = kge.make(ENV_ID, 4, backend="sim", seed=0)
    assert torch.equal(cpu.reset()[0], sim.reset()[0])
    generator = torch.Generator().manual_seed(0)
    for _ in range(8):
        actions = torch.randint(0, 3, (4, 3), generator=generator)
        expected = [t.clone() for t in cpu.step(actions)[:4]]
        for want, have in zip(expected, sim.step(actions)[:4]):
            assert torch.equal(want, have)
    assert np.array_equal(cpu.get_state()["moves"], sim.get_state()["moves"])
