"""DeviceCollector: records, in-place buffers, memory hand-off and bad input."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_rollout_envs import CountingActor, PolicyActor

from kernelgym.collectors.device_collector import DeviceCollector
from kernelgym.collectors.rollout import State, collect, prepare, startup

FIELDS = State._fields


def episode_length(index, episodes, max_len):
    """Both counter envs below end episode ``episodes`` of env ``index`` after this."""
    return 1 + (index * 7 + episodes * 3) % max_len


class FormulaCounterEnv(gym.Env):
    """One env: obs [t, episodes], reward action + 0.5, deterministic lengths."""

    observation_space = gym.spaces.Box(0.0, 1e6, shape=(2,), dtype=np.float32)
    action_space = gym.spaces.Discrete(3)

    def __init__(self, index, max_len, limit):
        self.index, self.max_len, self.limit = index, max_len, limit
        self.t = self.episodes = 0

    def reset(self, *, seed=None, options=None):
        self.t, self.episodes = 0, self.episodes + 1
        return np.array([self.t, self.episodes], np.float32), {}

    def step(self, action):
        self.t += 1
        terminated = self.t >= episode_length(self.index, self.episodes, self.max_len)
        truncated = not terminated and self.t >= self.limit
        return np.array([self.t, self.episodes], np.float32), float(action) + 0.5, terminated, truncated, {}


class TorchCounterVectorEnv:
    """The same envs batched in torch, with kernelgym's KernelVectorEnv interface
    (same_step autoreset; returned tensors are views the next step overwrites)."""

    single_action_space = gym.spaces.Discrete(3)
    num_agents = 1
    autoreset_mode = gym.vector.AutoresetMode.SAME_STEP

    def __init__(self, num_envs, max_len, limit):
        self.num_envs, self.max_len, self.limit = num_envs, max_len, limit
        self.device = torch.device("cpu")
        self.index = torch.arange(num_envs)
        self.t = torch.zeros(num_envs, dtype=torch.int64)
        self.episodes = torch.zeros(num_envs, dtype=torch.int64)
        self.obs = torch.zeros(num_envs, 2)
        self.final_obs = torch.zeros(num_envs, 2)
        self.reward = torch.zeros(num_envs)

    def _observe(self, out):
        out[:, 0], out[:, 1] = self.t, self.episodes
        return out

    def reset(self, seed=None):
        self.t.zero_()
        self.episodes.add_(1)
        return self._observe(self.obs), {}

    def step(self, actions):
        self.t.add_(1)
        terminated = self.t >= episode_length(self.index, self.episodes, self.max_len)
        truncated = ~terminated & (self.t >= self.limit)
        done = terminated | truncated
        self.reward.copy_(actions.float() + 0.5)
        self._observe(self.final_obs)
        self.t.masked_fill_(done, 0)
        self.episodes.add_(done.long())
        info = {"final_obs": self.final_obs.clone(), "_final_obs": done}
        return self._observe(self.obs), self.reward, terminated, truncated, info


@settings(max_examples=30)
@given(
    n_envs=st.integers(1, 4),
    n_steps=st.integers(1, 5),
    n_fragments=st.integers(1, 3),
    max_len=st.integers(1, 5),
    limit=st.integers(1, 5),
    bias=st.integers(0, 2),
)
def test_device_collector_writes_the_records_of_the_rollout_core(n_envs, n_steps, n_fragments, max_len, limit, bias):
    actor = PolicyActor(bias)
    envs = [FormulaCounterEnv(j, max_len, limit) for j in range(n_envs)]
    ctx, fragment = startup(envs, actor, prepare(FormulaCounterEnv(0, max_len, limit), actor, n_steps, n_envs))
    collector = DeviceCollector(TorchCounterVectorEnv(n_envs, max_len, limit), actor, n_steps)
    for _ in range(n_fragments):
        collect(envs, actor, fragment, ctx)
        got = collector.collect()
        for name in FIELDS:
            assert torch.equal(
                getattr(got.state, name), getattr(fragment.pyt.state, name).to(getattr(got.state, name).dtype)
            ), name
        assert torch.equal(got.env["final_obs"], fragment.pyt.env["final_obs"])
        assert torch.equal(got.actor["value"], fragment.pyt.actor["value"])


def test_recurrent_state_restarts_with_every_episode():
    collector = DeviceCollector(TorchCounterVectorEnv(3, max_len=4, limit=3), CountingActor(), 6)
    for _ in range(3):
        fragment = collector.collect()
        assert torch.equal(fragment.actor["count"], fragment.state.stepno.float())
        assert torch.equal(fragment.hx[0, :, 0], fragment.state.stepno[0].float())


def test_fragment_buffers_are_written_in_place():
    collector = DeviceCollector(TorchCounterVectorEnv(4, max_len=3, limit=5), CountingActor(), 4)
    iterator = iter(collector)
    first = next(iterator)
    pointers = [tensor.data_ptr() for tensor in first.state] + [first.env["final_obs"].data_ptr(), first.hx.data_ptr()]
    snapshot = first.state.obs.clone()
    for _ in range(3):
        fragment = next(iterator)
        assert fragment is first
        again = [tensor.data_ptr() for tensor in fragment.state] + [
            fragment.env["final_obs"].data_ptr(),
            fragment.hx.data_ptr(),
        ]
        assert again == pointers
    assert not torch.equal(first.state.obs, snapshot)  # refilled, not reallocated


class HalfBalancingActor(CountingActor):
    """Balances the pole in even envs (they reach the time limit), always pushes left
    in odd ones (they fall); keeps CountingActor's recurrent counter."""

    def step(self, stepno, obs, act, rew, fin, *, hx=None, virtual=False):
        _, hx, info = super().step(stepno, obs, act, rew, fin, hx=hx, virtual=virtual)
        balance = (obs[..., 2] + obs[..., 3] > 0).long()
        even = torch.arange(obs.shape[1]) % 2 == 0
        return torch.where(even, balance, torch.zeros_like(balance)), hx, info


def test_kernelgym_cartpole_on_the_cpu_backend():
    import kernelgym.envs as kge  # a declared dependency

    env = kge.make("CartPole-v1", num_envs=16, backend="cpu", seed=3, autoreset_mode="same_step", max_episode_steps=20)
    fragment = DeviceCollector(env, HalfBalancingActor(), 30, seed=3).collect()
    state = fragment.state
    assert state.obs.shape == (31, 16, 4) and state.obs.device == env.device
    assert torch.equal(state.fin[1:], state.terminated[1:] | state.truncated[1:])
    assert state.truncated.any() and state.terminated.any()
    ended = state.fin[1:]
    # the final observation differs from the record's only where an episode ended
    differs = (fragment.env["final_obs"] != state.obs[1:]).any(-1)
    assert torch.equal(differs & ~ended, torch.zeros_like(ended))
    assert torch.equal(state.stepno[1:][ended], torch.zeros(int(ended.sum()), dtype=torch.int64))
    assert (state.stepno[1:][~ended] == state.stepno[:-1][~ended] + 1).all()
    assert torch.equal(fragment.actor["count"], state.stepno.float())


def test_transitions_go_into_a_kernelgym_memory():
    memory_module = pytest.importorskip("kernelgym.memory")  # the `memory` extra
    n_envs, n_steps = 3, 4
    memory = memory_module.Memory(memory_size=16, num_envs=n_envs, device="cpu")
    memory.create_tensor("states", 2, torch.float32)
    memory.create_tensor("actions", 1, torch.int64)
    memory.create_tensor("rewards", 1, torch.float32)
    memory.create_tensor("next_states", 2, torch.float32)
    memory.create_tensor("terminated", 1, torch.bool)
    memory.create_tensor("truncated", 1, torch.bool)
    collector = DeviceCollector(TorchCounterVectorEnv(n_envs, 3, 2), PolicyActor(), n_steps)
    fragment = collector.collect()
    collector.add_to(memory)
    assert len(memory) == n_steps * n_envs  # rows x envs
    stored = memory.get_tensor_by_name("next_states")[:n_steps]
    assert torch.equal(stored, fragment.env["final_obs"])
    rewards = memory.get_tensor_by_name("rewards")[:n_steps, :, 0]
    assert torch.equal(rewards, fragment.state.rew[1:])
    with pytest.raises(KeyError, match="no tensor"):
        collector.add_to(memory, {"values": "rew"})
    with pytest.raises(KeyError, match="fragment fields"):
        collector.add_to(memory, {"states": "speed"})


def test_bad_input_is_rejected_before_any_step():
    env = TorchCounterVectorEnv(2, 3, 3)
    with pytest.raises(ValueError, match="n_steps: expected a positive int, got 0"):
        DeviceCollector(env, PolicyActor(), 0)
    with pytest.raises(TypeError, match="KernelVectorEnv"):
        DeviceCollector([env], PolicyActor(), 4)
    with pytest.raises(TypeError, match="actor"):
        DeviceCollector(env, object(), 4)
    env.autoreset_mode = gym.vector.AutoresetMode.NEXT_STEP
    with pytest.raises(ValueError, match="same_step"):
        DeviceCollector(env, PolicyActor(), 4)
    assert int(env.episodes.sum()) == 0  # never reset, never stepped


class ZeroActor(CountingActor):
    """Takes the all-zeros action (valid in every env below), counts steps in hx."""

    def step(self, stepno, obs, act, rew, fin, *, hx=None, virtual=False):
        _, hx, info = super().step(stepno, obs, act, rew, fin, hx=hx, virtual=virtual)
        return torch.zeros_like(act), hx, info


@pytest.mark.parametrize("env_id", ["Pendulum-v1", "TagGridWorld-v0"])
def test_kernelgym_envs_of_other_shapes(env_id):
    import kernelgym.envs as kge

    n_envs, n_steps, limit = 3, 9, 4
    env = kge.make(env_id, num_envs=n_envs, backend="cpu", seed=0, autoreset_mode="same_step", max_episode_steps=limit)
    agents = (env.num_agents,) if env.num_agents > 1 else ()
    fragment = DeviceCollector(env, ZeroActor(), n_steps, seed=0).collect()
    state = fragment.state
    assert state.obs.shape[:2] == (n_steps + 1, n_envs) and state.obs.shape[2:] == fragment.env["final_obs"].shape[2:]
    assert state.rew.shape == (n_steps + 1, n_envs, *agents)
    assert state.act.shape == (n_steps + 1, n_envs, *agents, *env.single_action_space.shape)
    assert torch.equal(state.fin[1:], state.terminated[1:] | state.truncated[1:])
    # the time limit truncates every episode that lasts `limit` steps
    assert (state.stepno < limit).all()
    assert torch.equal(state.truncated[1:], (state.stepno[:-1] == limit - 1) & ~state.terminated[1:])
    assert torch.equal(fragment.actor["count"], state.stepno.float())
    kept = ~state.fin[1:]
    assert torch.equal(fragment.env["final_obs"][kept], state.obs[1:][kept])


class TorchDictCounterVectorEnv(TorchCounterVectorEnv):
    """`TorchCounterVectorEnv` with a Dict observation: ``{"count": [t, episodes], "image": (2, 2) uint8}``
    (the image holds ``t`` in every pixel), as a kernelgym env with a Dict space returns it."""

    single_observation_space = gym.spaces.Dict(
        {
            "count": gym.spaces.Box(0.0, 1e6, shape=(2,), dtype=np.float32),
            "image": gym.spaces.Box(0, 255, shape=(2, 2), dtype=np.uint8),
        }
    )

    def _tree(self, flat):
        image = flat[:, :1, None].expand(-1, 2, 2).to(torch.uint8)
        return {"count": flat.clone(), "image": image.contiguous()}

    def reset(self, seed=None):
        obs, info = super().reset(seed)
        return self._tree(obs), info

    def step(self, actions):
        obs, reward, terminated, truncated, info = super().step(actions)
        return self._tree(obs), reward, terminated, truncated, {**info, "final_obs": self._tree(info["final_obs"])}


class DictPolicyActor(PolicyActor):
    """`PolicyActor` reading the Dict observation's ``count`` leaf."""

    def step(self, stepno, obs, act, rew, fin, *, hx=None, virtual=False):
        return super().step(stepno, obs["count"], act, rew, fin, hx=hx, virtual=virtual)


def test_dict_observations_are_recorded_leaf_by_leaf_and_go_into_a_memory_as_one_row():
    memory_module = pytest.importorskip("kernelgym.memory")  # the `memory` extra
    n_envs, n_steps = 3, 6
    env = TorchDictCounterVectorEnv(n_envs, 3, 2)
    collector = DeviceCollector(env, DictPolicyActor(), n_steps)
    fragment = collector.collect()
    state, finals = fragment.state, fragment.env["final_obs"]
    assert set(state.obs) == {"count", "image"} and state.obs["image"].dtype == torch.uint8
    assert state.obs["image"].shape == (n_steps + 1, n_envs, 2, 2) and finals["image"].shape == (n_steps, n_envs, 2, 2)
    # each leaf's final observation is the step's own where no episode ended, the kept one where one did
    ended = state.fin[1:]
    assert torch.equal(finals["count"][~ended], state.obs["count"][1:][~ended])
    assert torch.equal(finals["image"][..., 0, 0], finals["count"][..., 0].to(torch.uint8))
    assert (finals["count"][ended][:, 0] > 0).all() and (state.obs["count"][1:][ended][:, 0] == 0).all()
    memory = memory_module.Memory(memory_size=16, num_envs=n_envs, device="cpu")
    memory.create_tensor("states", env.single_observation_space, torch.float32)
    memory.create_tensor("next_states", env.single_observation_space, torch.float32)
    collector.add_to(memory, {"states": "obs", "next_states": "final_obs"})
    stored = memory.get_tensor_by_name("next_states")[:n_steps]
    assert stored.shape == (n_steps, n_envs, 6)
    assert torch.equal(stored[..., :2], finals["count"])
    assert torch.equal(stored[..., 2:], finals["image"].reshape(n_steps, n_envs, 4).float())


class OneEnvActor(CountingActor):
    """Returns its recurrent state or its info sized for one env, from step ``bad_from`` on."""

    def __init__(self, output, bad_from=0):
        super().__init__()
        self.output, self.bad_from, self.calls = output, bad_from, 0

    def step(self, stepno, obs, act, rew, fin, *, hx=None, virtual=False):
        act, hx, info = super().step(stepno, obs, act, rew, fin, hx=hx, virtual=virtual)
        self.calls += 1
        if self.calls > self.bad_from:
            if self.output == "hx":
                hx = hx[:, :1]
            else:
                info = {"count": info["count"][:, :1]}
        return act, hx, info


@pytest.mark.parametrize("output", ["hx", "info"])
@pytest.mark.parametrize("bad_from", [0, 3])
def test_a_state_or_info_sized_for_one_env_is_refused_not_broadcast(output, bad_from):
    env = StepCountingEnv(3, max_len=4, limit=3)
    pattern = rf"the output '{output}'.*\.step: expected shape .*3.*got \(1, 1(, 1)?\)"
    with pytest.raises(ValueError, match=pattern):
        DeviceCollector(env, OneEnvActor(output, bad_from), 4).collect()
    # refused at the actor call that gave it (the first is at construction), before the env steps on it
    assert env.steps == max(0, bad_from - 1)


class StepCountingEnv(TorchCounterVectorEnv):
    steps = 0

    def step(self, actions):
        self.steps += 1
        return super().step(actions)
