"""The demo's PPO suits a GPU: no host read within a fragment or an update epoch, an env
count chosen for the device, and compile and warm-up reported apart from training.

A host read (``.item()``, ``bool(tensor)``, ``.tolist()``, ...) waits for the device on
cuda. `HostReads` counts them on the cpu backend, where the same torch ops run: a read
found here would stall a GPU and break the fragment's CUDA graph.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.distributions import Categorical

import kernelgym.cli.ppo as ppo
import kernelgym.envs as kge
from kernelgym.collectors.device_collector import DeviceCollector
from kernelgym.collectors.host_reads import HostReads

CONFIG = ppo.PPOConfig(seed=3, backend="cpu", num_envs=16, num_steps=8)


def parts(agent_class=ppo.PPOAgent):
    """A cpu CartPole, the demo's agent, optimizer, collector and memory (one fragment collected)."""
    torch.manual_seed(CONFIG.seed)
    env = kge.make("CartPole-v1", CONFIG.num_envs, backend="cpu", seed=CONFIG.seed, autoreset_mode="same_step")
    agent = agent_class(4, 2, CONFIG.hidden_size)
    optimizer = ppo.make_optimizer(agent, CONFIG)
    collector = DeviceCollector(env, agent, CONFIG.num_steps, seed=CONFIG.seed)
    memory = ppo.make_memory(CONFIG.num_steps, CONFIG.num_envs, 4, "cpu", CONFIG.seed)
    collector.collect()  # first calls outside the count: nothing is read there either, but it compiles
    return env, agent, optimizer, collector, memory


class CheckedAgent(ppo.PPOAgent):
    """The demo's agent with torch's default argument checks in its distribution."""

    def policy(self, obs):
        return Categorical(logits=self.actor(obs), validate_args=True)


def test_a_fragment_its_advantages_and_an_update_epoch_read_nothing_on_the_host():
    env, agent, optimizer, collector, memory = parts()
    with HostReads() as collecting:
        fragment = collector.collect()
    with HostReads() as learning:
        ppo.learn_from_fragment(fragment, agent, memory, CONFIG)
    with HostReads() as updating:
        losses = ppo.update_epoch(agent, optimizer, memory, CONFIG)
    assert collecting.reads == [], collecting.summary()
    assert learning.reads == [], learning.summary()
    assert updating.reads == [], updating.summary()
    assert losses.shape == (3,) and bool(torch.isfinite(losses).all())
    env.close()


def test_the_count_sees_the_reads_of_a_checked_distribution():
    # the same regions with torch's default distribution checks: each check is a host read
    env, agent, optimizer, collector, memory = parts(CheckedAgent)
    with HostReads() as collecting:
        fragment = collector.collect()
    ppo.learn_from_fragment(fragment, agent, memory, CONFIG)
    with HostReads() as updating:
        ppo.update_epoch(agent, optimizer, memory, CONFIG)
    assert len(collecting.reads) >= CONFIG.num_steps  # at least one per step
    assert len(updating.reads) >= CONFIG.num_minibatches
    assert all("_local_scalar_dense" in read for read in collecting.reads + updating.reads)
    env.close()


@pytest.mark.slow
def test_training_reads_the_host_once_per_iteration():
    def reads(iterations):
        config = ppo.PPOConfig(
            seed=2, backend="cpu", num_envs=16, num_steps=8, max_env_steps=iterations * 16 * 8, update_epochs=2
        )
        with HostReads() as counted:
            result = ppo.train(config, progress=False)
        assert len(result.env_steps) == iterations
        return counted.reads

    two, three = reads(2), reads(3)
    assert len(three) - len(two) == 1, three[len(two) - 1 :]  # the iteration's statistics
    assert three[-1].startswith("Tensor.tolist at") and "ppo.py" in three[-1]


def reference_returns(rewards, over, running):
    """The returns of the episodes ending in the fragment, one step at a time (the demo's old loop)."""
    finished = np.full(rewards.shape, np.nan, dtype=np.float32)
    running = running.copy()
    for t in range(len(rewards)):
        running += rewards[t]
        finished[t] = np.where(over[t], running, np.nan)
        running *= 1.0 - over[t]
    return finished, running


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 12), st.integers(1, 5), st.data())
def test_episode_returns_match_the_step_by_step_sums(steps, envs, data):
    integers = st.integers(-3, 3)  # whole rewards (CartPole's 1, Acrobot's -1): the sums are exact either way
    rewards = np.array(data.draw(st.lists(integers, min_size=steps * envs, max_size=steps * envs)), np.float32)
    over = np.array(data.draw(st.lists(st.booleans(), min_size=steps * envs, max_size=steps * envs)), np.float32)
    carried = np.array(data.draw(st.lists(integers, min_size=envs, max_size=envs)), np.float32)
    rewards, over = rewards.reshape(steps, envs), over.reshape(steps, envs)
    want, want_running = reference_returns(rewards, over, carried)
    running = torch.from_numpy(carried.copy())
    got = ppo.episode_returns(torch.from_numpy(rewards), torch.from_numpy(over), running)
    np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(running.numpy(), want_running)


@pytest.mark.parametrize(("sms", "count"), [(1, 64), (20, 64), (46, 64), (84, 128), (108, 128), (132, 256), (400, 256)])
def test_the_env_count_on_a_gpu_follows_its_sm_count(monkeypatch, sms, count):
    class Properties:
        name, multi_processor_count = "NVIDIA Stand-in", sms

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: Properties)
    got, reason = ppo.choose_num_envs(torch.device("cuda"))
    assert got == count
    low, high = ppo.GPU_NUM_ENVS
    assert got == min(high, max(low, got)) and got & (got - 1) == 0  # a power of two within the bounds
    assert got <= max(low, sms * ppo.ENVS_PER_SM)
    assert reason.startswith(f"NVIDIA Stand-in has {sms} SMs: {ppo.ENVS_PER_SM} envs per SM, down to a power of two")
    ppo.PPOConfig(num_envs=got)  # a valid config: its batch splits into the minibatches


def run_demo(capsys, monkeypatch, backend, *argv):
    """``kernelgym demo`` with ``train`` stubbed: the config it would train with, and what it printed."""
    import kernelgym.cli.main as cli

    configs = []

    def train(config, progress, tensorboard_dir):
        configs.append(config)
        result = ppo.TrainResult(config=config, backend=backend, agent=None, compile_s=2.5, warmup_s=1.5)
        result.env_steps, result.wall_s, result.mean_returns = [512, 1024], [1.5, 4.0], [20.0, 30.0]
        return result

    monkeypatch.setattr(cli, "resolve_backend_or_exit", lambda parser, name: backend)
    monkeypatch.setattr(ppo, "train", train)
    monkeypatch.setattr(ppo, "choose_num_envs", lambda device: (512, "a stand-in GPU has 132 SMs"))
    monkeypatch.setattr("kernelgym.cli.outputs.save_output", lambda *args: True)
    code = cli.main(["demo", "--no-progress", "--backend", backend, *argv])
    return code, configs[0], capsys.readouterr().out


def test_on_cuda_the_demo_chooses_the_env_count_and_says_why(capsys, monkeypatch):
    code, config, out = run_demo(capsys, monkeypatch, "cuda")
    assert code == 1 and config.num_envs == 512
    assert "kernelgym demo: 512 envs on cuda (a stand-in GPU has 132 SMs)" in out


@pytest.mark.parametrize("backend", ["cuda", "cpu"])
def test_a_given_env_count_is_kept_on_every_backend(capsys, monkeypatch, backend):
    code, config, out = run_demo(capsys, monkeypatch, backend, "--num-envs", "64")
    assert config.num_envs == 64
    assert f"kernelgym demo: 64 envs on {backend} (--num-envs)" in out


def test_compile_and_warm_up_are_reported_apart_from_training(capsys, monkeypatch):
    code, config, out = run_demo(capsys, monkeypatch, "cpu")
    assert config.num_envs == 64 and "kernelgym demo: 64 envs on cpu (the default on cpu)" in out
    assert "after 1,024 env steps in 4.0 s" in out
    assert "time: compile 2.5 s (make the env: compile or load its kernels), warm-up 1.5 s" in out
    assert "training 2.5 s" in out


@pytest.mark.slow
def test_a_short_demo_run_times_its_parts():
    result = ppo.train(ppo.PPOConfig(seed=4, backend="cpu", num_envs=16, num_steps=16, max_env_steps=3 * 256))
    assert result.compile_s > 0 and 0 < result.warmup_s <= result.wall_s[0]
    assert result.training_s == pytest.approx(result.wall_time_s - result.warmup_s)
    assert not result.captured  # the cpu backend collects eagerly, as asked
