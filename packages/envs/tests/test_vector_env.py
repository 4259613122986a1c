"""KernelVectorEnv: autoreset, time limits, zero-copy views and input validation.

The stateful test drives a small CartPole batch with random actions, resets and bad
inputs, and checks every step against a reference model built from the env's CPU
reference implementation and gymnasium's autoreset rules.
"""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import kernelgym.envs as kge
from kernelgym.envs.classic import cartpole
from kernelgym.envs.vector_env import KernelVectorEnv

N = 4
LIMIT = 5
PARAMS = cartpole.CartPoleParams()
# Steps that leave the reference and the kernel on different sides of a threshold
# (float32 vs float64 rounding) are taken from the env; see test_cartpole.py.
THRESHOLD_SLACK = 1e-5


def _near_threshold(obs):
    return (
        abs(abs(obs[0]) - PARAMS.x_threshold) < THRESHOLD_SLACK
        or abs(abs(obs[2]) - PARAMS.theta_threshold_radians) < THRESHOLD_SLACK
    )


def _slice(state, index):
    return {name: np.array(values[index]) for name, values in state.items()}


class VectorEnvMachine(RuleBasedStateMachine):
    @initialize(mode=st.sampled_from(["next_step", "same_step"]), seed=st.integers(0, 2**32 - 1))
    def make_env(self, mode, seed):
        self.mode = mode
        self.env = kge.make("CartPole-v1", N, backend="cpu", seed=seed, autoreset_mode=mode, max_episode_steps=LIMIT)
        obs, info = self.env.reset()
        assert info == {}
        self.obs_view = obs
        self._sync_all()

    def _sync_all(self):
        state = self.env.get_state()
        self.states = [_slice(state, index) for index in range(N)]
        self.steps = [0] * N
        self.pending = [False] * N

    @rule(seed=st.none() | st.integers(0, 2**32 - 1))
    def reset(self, seed):
        obs, _ = self.env.reset(seed=seed)
        assert obs.data_ptr() == self.obs_view.data_ptr()  # the same buffer, never rebound
        assert (obs.abs() <= PARAMS.reset_bound).all()
        self._sync_all()

    @rule(actions=st.lists(st.integers(0, 1), min_size=N, max_size=N), as_numpy=st.booleans())
    def step(self, actions, as_numpy):
        batch = np.array(actions, dtype=np.int64) if as_numpy else torch.tensor(actions)
        obs, rewards, terminated, truncated, info = self.env.step(batch)
        assert obs.data_ptr() == self.obs_view.data_ptr()
        assert rewards.dtype == torch.float32 and terminated.dtype == truncated.dtype == torch.bool
        new_state = self.env.get_state()
        for index in range(N):
            if self.mode == "next_step" and self.pending[index]:
                assert rewards[index] == 0 and not terminated[index] and not truncated[index]
                assert not info["_episode"][index]  # the reset step belongs to no episode
                assert (obs[index].abs() <= PARAMS.reset_bound).all()
                self.states[index] = _slice(new_state, index)
                self.steps[index] = 0
                self.pending[index] = False
                continue
            expected_state, expected_reward, expected_terminated = cartpole.reference.step(
                PARAMS, self.states[index], actions[index]
            )
            expected_obs = cartpole.reference.observe(PARAMS, expected_state)
            if _near_threshold(expected_obs):
                expected_terminated = bool(terminated[index])
            self.steps[index] += 1
            expected_truncated = self.steps[index] >= LIMIT
            assert rewards[index] == expected_reward
            assert bool(terminated[index]) == expected_terminated
            assert bool(truncated[index]) == expected_truncated
            done = expected_terminated or expected_truncated
            # episode statistics: CartPole pays 1 per step, so the return equals the length
            assert bool(info["_episode"][index]) == done
            expected_episode = self.steps[index] if done else 0
            assert info["episode"]["l"][index] == expected_episode
            assert info["episode"]["r"][index] == expected_episode
            if self.mode == "same_step":
                assert bool(info["_final_obs"][index]) == done
                if done:
                    np.testing.assert_allclose(info["final_obs"][index].numpy(), expected_obs, rtol=1e-5, atol=1e-6)
                    assert (obs[index].abs() <= PARAMS.reset_bound).all()
                    self.steps[index] = 0
                else:
                    np.testing.assert_allclose(obs[index].numpy(), expected_obs, rtol=1e-5, atol=1e-6)
            else:
                assert set(info) == {"episode", "_episode"}
                np.testing.assert_allclose(obs[index].numpy(), expected_obs, rtol=1e-5, atol=1e-6)
                self.pending[index] = done
            self.states[index] = _slice(new_state, index)

    @rule(bad=st.sampled_from(["out_of_range", "negative", "float", "bool", "shape", "list", "meta"]))
    def bad_actions_change_nothing(self, bad):
        before = self.env.get_state()
        obs_before = self.obs_view.clone()
        actions = {
            "out_of_range": torch.tensor([0, 1, 2, 0]),
            "negative": np.array([0, -1, 0, 0]),
            "float": torch.zeros(N),
            "bool": torch.zeros(N, dtype=torch.bool),
            "shape": torch.zeros((N, 2), dtype=torch.int64),
            "list": [0] * N,
            "meta": torch.zeros(N, dtype=torch.int64, device="meta"),
        }[bad]
        with pytest.raises((TypeError, ValueError), match="actions"):
            self.env.step(actions)
        after = self.env.get_state()
        assert all(np.array_equal(before[name], after[name]) for name in before)
        assert torch.equal(obs_before, self.obs_view)

    @invariant()
    def numpy_views_alias_the_tensors(self):
        if hasattr(self, "env"):
            views = self.env.numpy()
            assert np.shares_memory(views.obs, self.obs_view.numpy())


VectorEnvMachine.TestCase.settings = settings(max_examples=15, stateful_step_count=25)
TestVectorEnv = VectorEnvMachine.TestCase


def test_outputs_are_zero_copy_views_overwritten_by_the_next_step():
    env = kge.make("CartPole-v1", 8, backend="cpu", seed=0)
    obs, _ = env.reset()
    first = obs.clone()
    obs2, rewards, terminated, truncated, _ = env.step(torch.ones(8, dtype=torch.int64))
    assert obs2 is obs and not torch.equal(obs, first)
    views = env.numpy()
    assert np.shares_memory(views.obs, obs.numpy()) and np.shares_memory(views.rewards, rewards.numpy())
    np_obs, np_rewards, np_terminated, np_truncated, _ = env.step(np.ones(8, dtype=np.int64), numpy=True)
    assert isinstance(np_obs, np.ndarray) and np.shares_memory(np_obs, obs.numpy())
    assert env.device == torch.device("cpu") and obs.device == env.device


def test_buffers_live_in_a_core_data_manager_by_name():
    env = kge.make("CartPole-v1", 5, backend="cpu", seed=0)
    obs, _ = env.reset()
    manager = env.data_manager
    assert manager.data_on_device_via_torch("observations") is obs
    assert manager.device_data("x") is env.state["x"]
    obs, rewards, _, _, _ = env.step(torch.ones(5, dtype=torch.int64))
    assert manager.data_on_device_via_torch("rewards") is rewards
    np.testing.assert_array_equal(manager.pull_data_from_device("_timestep_"), np.ones(5, np.int32))
    assert manager.get_dtype("x") == np.float32 and manager.get_shape("observations") == (5, 4)


def test_state_names_reserved_for_the_runtime_are_refused():
    import dataclasses

    from kernelgym.envs import StateArray

    spec = dataclasses.replace(
        kge.get_spec("CartPole-v1"), state=kge.get_spec("CartPole-v1").state + (StateArray("rewards", np.float32),)
    )
    with pytest.raises(ValueError, match="reserved"):
        KernelVectorEnv(spec, 2, backend="cpu")


def test_accepts_any_integer_dtype_and_float64_is_refused_for_discrete():
    env = kge.make("CartPole-v1", 3, backend="cpu", seed=0)
    env.reset()
    for dtype in (torch.int8, torch.int32, torch.uint8):
        env.step(torch.ones(3, dtype=dtype))
    with pytest.raises(TypeError, match="integer dtype"):
        env.step(np.ones(3, dtype=np.float64))


def test_error_names_the_bad_action_and_its_position():
    env = kge.make("CartPole-v1", 3, backend="cpu", seed=0)
    env.reset()
    with pytest.raises(ValueError, match=r"got 7 at index \(2,\)"):
        env.step(torch.tensor([0, 1, 7]))


def test_check_action_values_can_be_turned_off_but_types_are_still_checked():
    env = kge.make("CartPole-v1", 2, backend="cpu", seed=0, check_action_values=False)
    env.reset()
    env.step(torch.tensor([5, 1]))  # any value other than 1 pushes left, as in the kernel
    with pytest.raises(TypeError):
        env.step(torch.zeros(2))


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"num_envs": 0}, ValueError, "num_envs"),
        ({"num_envs": 2.0}, TypeError, "num_envs"),
        ({"num_envs": True}, TypeError, "num_envs"),
        ({"num_envs": 2, "autoreset_mode": "sometimes"}, ValueError, "autoreset_mode"),
        ({"num_envs": 2, "max_episode_steps": 0}, ValueError, "max_episode_steps"),
        ({"num_envs": 2, "gravity": "strong"}, TypeError, "gravity"),
        ({"num_envs": 2, "gravity_typo": 1.0}, TypeError, "gravity_typo"),
        ({"num_envs": 2, "masspole": -1.0}, ValueError, "masspole"),
        ({"num_envs": 2, "sutton_barto_reward": 1}, TypeError, "sutton_barto_reward"),
        ({"num_envs": 2, "backend": "tpu"}, ValueError, "backend"),
        ({"num_envs": 2, "check_action_values": "yes"}, TypeError, "check_action_values"),
    ],
)
def test_make_rejects_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        kge.make("CartPole-v1", **kwargs)


def test_params_overrides_reach_the_kernel():
    light = kge.make("CartPole-v1", 1, backend="cpu", seed=0, force_mag=1.0, gravity=3)
    assert light.params.gravity == 3.0 and isinstance(light.params.gravity, float)
    heavy = kge.make("CartPole-v1", 1, backend="cpu", seed=0)
    state = {
        "x": np.float32([0.0]),
        "x_dot": np.float32([0.0]),
        "theta": np.float32([0.0]),
        "theta_dot": np.float32([0.0]),
    }
    light.set_state(state)
    heavy.set_state(state)
    push = torch.ones(1, dtype=torch.int64)
    light.step(push)
    heavy.step(push)
    light_obs, heavy_obs = light.step(push)[0], heavy.step(push)[0]
    assert 0 < light_obs[0, 1] < heavy_obs[0, 1]  # a 10x weaker push gives a slower cart


def test_get_and_set_state_validate_their_inputs():
    env = kge.make("CartPole-v1", 3, backend="cpu", seed=0)
    env.reset()
    state = env.get_state(1)
    assert set(state) == {"x", "x_dot", "theta", "theta_dot"} and state["x"].shape == ()
    # any subset of the keys is taken (issue 24); an unknown key is still refused
    with pytest.raises(KeyError, match=r"unknown \['y'\]"):
        env.set_state({"x": np.float32(0), "y": np.float32(0)}, index=0)
    with pytest.raises(ValueError, match=r"state\['x'\]"):
        env.set_state(dict(state, x=np.zeros(2, np.float32)), index=0)
    with pytest.raises(TypeError, match="dtype"):
        env.set_state(dict(state, x=np.array(1 + 2j)), index=0)
    with pytest.raises(IndexError, match="index"):
        env.get_state(3)
    env.set_state({name: np.float32(0.01) for name in state}, index=2)
    assert env.get_state(2)["theta"] == np.float32(0.01)
    assert env.get_state(0)["theta"] != np.float32(0.01)


TAG_ENVS = 3


def _small_tag(episode_length):
    """TagGridWorld with one tagger and one runner: its env counts ``timestep`` (spec.episode_step)."""
    env = kge.make("TagGridWorld-v0", TAG_ENVS, backend="cpu", seed=0, num_taggers=1, episode_length=episode_length)
    env.reset()
    return env


# episode_length is compiled into the kernels (a build per value): a few lengths, 1 (every
# step truncates) to 12, 5 also the next test's
@settings(max_examples=10)
@given(episode_length=st.sampled_from((1, 2, 5, 12)), data=st.data())
def test_set_state_mid_episode_is_truncated_when_its_episode_ends(episode_length, data):
    # Regression: set_state used to restart the runtime's step counter at 0 whatever the
    # env's own timestep, so a Tag env set to step k ran to k + episode_length (t/T > 1).
    starts = data.draw(st.lists(st.integers(0, episode_length - 1), min_size=TAG_ENVS, max_size=TAG_ENVS))
    one_by_one = data.draw(st.booleans())
    env = _small_tag(episode_length)
    state = env.get_state()
    state["timestep"] = np.array(starts, np.int32)
    if one_by_one:
        for index in range(TAG_ENVS):
            env.set_state({name: value[index] for name, value in state.items()}, index=index)
    else:
        env.set_state(state)
    np.testing.assert_array_equal(env.data_manager.pull_data_from_device("_timestep_"), starts)
    stay = np.zeros((TAG_ENVS, env.num_agents), np.int64)  # tagger in the centre, runner in the corner: no tag
    truncated_at = [None] * TAG_ENVS
    for step in range(1, episode_length - min(starts) + 1):
        obs, _, terminated, truncated, _ = env.step(stay, numpy=True)
        time = obs[:, :, -1]  # every agent's t / episode_length
        assert np.all((time >= 0) & (time <= 1)), f"t/T {time} outside [0, 1] at step {step}"
        assert not terminated.any()
        for index in np.flatnonzero(truncated):
            if truncated_at[index] is None:
                truncated_at[index] = step
                assert time[index, 0] == 1.0
    assert truncated_at == [episode_length - start for start in starts]


def test_set_state_refuses_a_negative_episode_step_and_changes_nothing():
    env = _small_tag(5)
    before = env.get_state()
    with pytest.raises(ValueError, match=r"state\['timestep'\] of env 1: expected >= 0 .*got -1; nothing was written"):
        env.set_state(dict({name: value[1] for name, value in before.items()}, timestep=np.int32(-1)), index=1)
    assert all(np.array_equal(before[name], env.get_state()[name]) for name in before)


def test_set_state_restarts_the_step_counter_of_envs_without_an_episode_step():
    env = kge.make("CartPole-v1", 2, backend="cpu", seed=0)
    env.reset()
    env.step(torch.ones(2, dtype=torch.int64))
    env.set_state(env.get_state(0), index=0)
    np.testing.assert_array_equal(env.data_manager.pull_data_from_device("_timestep_"), [0, 1])


def test_reset_rejects_options_and_bad_seeds():
    env = kge.make("CartPole-v1", 2, backend="cpu", seed=0)
    with pytest.raises(ValueError, match="options"):
        env.reset(options={"low": -1})
    with pytest.raises(ValueError, match="seed"):
        env.reset(seed=-3)


def test_spaces_follow_gymnasium_vector_conventions():
    env = kge.make("CartPole-v1", 6, backend="cpu", seed=0)
    assert env.single_action_space.n == 2
    assert env.action_space.shape == (6,)
    assert env.observation_space.shape == (6, 4)
    assert env.single_observation_space.shape == (4,)
    assert env.num_agents == 1
    assert env.autoreset_mode.value == "NextStep"
    assert isinstance(env, KernelVectorEnv)


def test_render_delegates_to_the_cartpole_renderer():
    env = kge.make("CartPole-v1", 2, backend="cpu", seed=0)
    env.reset()
    state = {
        "x": np.float32([0.0, 1.5]),
        "x_dot": np.float32([0.0, 0.0]),
        "theta": np.float32([0.0, 0.1]),
        "theta_dot": np.float32([0.0, 0.0]),
    }
    env.set_state(state)
    centred, moved = env.render(0), env.render(1)
    assert centred.dtype == np.uint8 and centred.ndim == 3 and centred.shape[2] == 3
    assert centred.shape == moved.shape and not np.array_equal(centred, moved)
    with pytest.raises(TypeError, match="index"):
        env.render(0.5)


def test_closed_env_refuses_to_step():
    env = kge.make("CartPole-v1", 2, backend="cpu", seed=0)
    env.reset()
    env.close()
    with pytest.raises(RuntimeError, match="closed"):
        env.step(torch.zeros(2, dtype=torch.int64))


def test_missing_gpu_is_an_error_not_a_fallback():
    from kernelgym.core import BackendUnavailableError
    from kernelgym.core.backends import gpu_usable

    if gpu_usable():
        pytest.skip("this machine has a GPU: the error path cannot be reached")
    with pytest.raises(BackendUnavailableError):
        kge.make("CartPole-v1", 2, backend="cuda")


@pytest.mark.sim
def test_same_step_autoreset_in_simulator_matches_cpu():
    cpu = kge.make("CartPole-v1", 6, backend="cpu", seed=9, autoreset_mode="same_step", max_episode_steps=4)
    sim = kge.make("CartPole-v1", 6, backend="sim", seed=9, autoreset_mode="same_step", max_episode_steps=4)
    cpu.reset()
    sim.reset()
    for _ in range(9):
        actions = torch.ones(6, dtype=torch.int64)
        expected = cpu.step(actions)
        got = sim.step(actions)
        for want, have in zip(expected[:4], got[:4]):
            assert torch.equal(want, have)
        assert torch.equal(expected[4]["final_obs"], got[4]["final_obs"])
        assert torch.equal(expected[4]["_final_obs"], got[4]["_final_obs"])


@pytest.mark.sim
def test_simulator_buffers_stay_in_place_and_bad_actions_change_nothing():
    # "sync": the contract that nothing changes (the sim default, "deferred", steps the
    # good envs: test_step_hot_path)
    env = kge.make("CartPole-v1", 4, backend="sim", seed=2, check_action_values="sync")
    obs, _ = env.reset(seed=2)
    pointer = obs.data_ptr()
    start = obs.clone()
    assert torch.equal(env.reset(seed=2)[0], start)
    before = env.get_state()
    with pytest.raises(ValueError, match="actions"):
        env.step(torch.tensor([0, 1, 2, 0]))
    assert all(np.array_equal(before[name], env.get_state()[name]) for name in before)
    env.set_state({name: np.float32(0.0) for name in before}, index=3)
    obs, _, _, _, _ = env.step(torch.ones(4, dtype=torch.int64))
    assert obs.data_ptr() == pointer and obs[3, 1] > 0  # pushed right from rest


WARM_MAKE = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from numba.core import event

    compiled = []

    class Compiles(event.Listener):
        def on_start(self, event):
            compiled.append(str(event.data["dispatcher"]))

        def on_end(self, event):
            pass

    event.register("numba:compile", Compiles())
    import kernelgym.envs as kge

    env = kge.make("CartPole-v1", 4, backend="cpu", seed=0)
    observations = [env.reset(seed=3, numpy=True)[0].tolist()]
    for _ in range(5):
        observations.append(env.step(np.array([0, 1, 1, 0]), numpy=True)[0].tolist())
    torch_imported = "torch" in sys.modules
    import torch

    tensor_obs = env.step(torch.tensor([1, 0, 0, 1]))[0]  # the first tensor step makes the views
    views = [tensor_obs.tolist() == env.numpy().obs.tolist()]
    env.step(np.array([0, 0, 0, 0]), numpy=True)
    views.append(tensor_obs.tolist() == env.numpy().obs.tolist())
    views.append(tensor_obs.data_ptr() == env.numpy().obs.ctypes.data)
    print(json.dumps({"compiled": compiled, "lowering": "numba.np.arrayobj" in sys.modules,
                      "observations": observations, "torch_imported": torch_imported, "views": views}))
    """
)


def test_a_make_with_a_warm_cache_compiles_nothing_and_steps_as_a_compiled_one():
    # issue 35: a warm make loads its launchers from the disk cache, without Numba's compiler
    # (its lowering modules, about 1 s of a make) and without compiling anything
    env = {key: value for key, value in os.environ.items() if key != "NUMBA_ENABLE_CUDASIM"}
    env["KERNELGYM_CPU_THREADS"] = "one"  # the serial launchers only: one compile when the cache is cold
    runs = []
    for _ in range(2):  # the first fills the cache where this session's is cold
        result = subprocess.run([sys.executable, "-c", WARM_MAKE], capture_output=True, text=True, env=env, timeout=900)
        assert result.returncode == 0, result.stderr
        runs.append(json.loads(result.stdout.strip().splitlines()[-1]))
    first, warm = runs
    assert warm["compiled"] == [] and not warm["lowering"]
    # numpy steps never import torch (seconds of a process's start); the first tensor step makes
    # views that alias the buffers, which later steps overwrite in place
    assert not first["torch_imported"] and not warm["torch_imported"]
    assert warm["views"] == [True, True, True]
    assert warm["observations"] == first["observations"]
    assert np.isfinite(warm["observations"]).all() and warm["observations"][0] != warm["observations"][-1]


def test_a_numpy_steps_info_holds_what_the_tensor_views_hold():
    # the numpy info is read from the buffers themselves (no torch views needed): the final
    # observations, their mask and the episode statistics the tensor views show, as numpy arrays
    env = kge.make("CartPole-v1", 8, backend="cpu", seed=0, autoreset_mode="same_step")
    env.reset(seed=1)
    views = env.step(torch.zeros(8, dtype=torch.int64))[4]  # views, overwritten by later steps
    generator = np.random.default_rng(0)
    ended = 0
    for _ in range(60):
        *_, info = env.step(generator.integers(0, 2, 8), numpy=True)
        assert set(info) == set(views) == {"final_obs", "_final_obs", "episode", "_episode"}
        for got, shown in ((info["final_obs"], views["final_obs"]), (info["_final_obs"], views["_final_obs"])):
            assert isinstance(got, np.ndarray) and np.array_equal(got, shown.numpy())
        for got, shown in (
            (info["episode"]["r"], views["episode"]["r"]),
            (info["episode"]["l"], views["episode"]["l"]),
        ):
            assert isinstance(got, np.ndarray) and np.array_equal(got, shown.numpy())
        assert np.array_equal(info["_episode"], views["_episode"].numpy())
        ended += int(info["_final_obs"].sum())
    env.close()
    assert ended > 0  # episodes ended: the final observations and statistics were written
