"""The rollout core (prepare/startup/collect/evaluate/episode) against a plain model."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_rollout_envs import ConstantActor, CounterEnv, CountingActor, PolicyActor

from kernelgym.collectors.rollout import (
    State,
    collect,
    context,
    episode,
    episodic,
    evaluate,
    inprocess,
    prepare,
    startup,
)

FIELDS = State._fields


def seeded_envs(seeds, max_len, limit):
    envs = [CounterEnv(max_len, limit) for _ in seeds]
    for env, seed in zip(envs, seeds):
        env.reset(seed=seed)
    return envs


def reference_fragments(envs, n_fragments, n_steps, bias, sticky=False):
    """The documented records, computed env by env in plain Python.

    Returns a list of fragments, each a dict of numpy arrays ``(1 + T) x B``
    (``obs``: ``(1 + T) x B x 2``) plus ``final_obs`` ``T x B x 2`` and ``value``.
    """
    cur = []
    for env in envs:
        obs, _ = env.reset()
        cur.append(dict(stepno=0, obs=obs, act=0, rew=0.0, fin=True, terminated=False, truncated=False))
    fragments = []
    for _ in range(n_fragments):
        records, finals = [], []
        for t in range(n_steps + 1):
            records.append([dict(rec) for rec in cur])
            if t == n_steps:
                break
            step_finals = []
            for j, env in enumerate(envs):
                rec = cur[j]
                action = int(rec["obs"][0] + rec["obs"][1] + bias) % 3
                rec["act"] = action
                if sticky and t > 0 and rec["fin"]:
                    rec["rew"] = 0.0
                    step_finals.append(rec["obs"])
                    continue
                obs, rew, terminated, truncated, _ = env.step(action)
                step_finals.append(obs)
                rec["fin"] = terminated or truncated
                rec["stepno"] = 0 if rec["fin"] else rec["stepno"] + 1
                if rec["fin"]:
                    obs, _ = env.reset()
                rec.update(obs=obs, rew=rew, terminated=terminated, truncated=truncated)
            finals.append(step_finals)
        fragment = {name: np.array([[rec[name] for rec in row] for row in records]) for name in FIELDS}
        fragment["final_obs"] = np.array(finals)
        fragment["value"] = fragment["obs"][..., 0] * 2.0
        fragments.append(fragment)
    return fragments


def assert_fragment_equal(fragment, expected):
    for name in FIELDS:
        got = fragment.state._asdict()[name].numpy()
        want = expected[name]
        np.testing.assert_array_equal(got, want.astype(got.dtype), err_msg=name)
    np.testing.assert_array_equal(fragment.env["final_obs"].numpy(), expected["final_obs"])
    np.testing.assert_array_equal(fragment.actor["value"].numpy(), expected["value"])


@settings(max_examples=40)
@given(
    n_envs=st.integers(1, 4),
    n_steps=st.integers(1, 6),
    n_fragments=st.integers(1, 3),
    max_len=st.integers(1, 6),
    limit=st.integers(1, 6),
    bias=st.integers(0, 2),
    sticky=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_collect_records_match_the_plain_model(n_envs, n_steps, n_fragments, max_len, limit, bias, sticky, seed):
    seeds = [seed + j for j in range(n_envs)]
    actor = PolicyActor(bias)
    envs = seeded_envs(seeds, max_len, limit)
    buffer = prepare(CounterEnv(max_len, limit), actor, n_steps, n_envs)
    ctx, fragment = startup(envs, actor, buffer)
    expected = reference_fragments(seeded_envs(seeds, max_len, limit), n_fragments, n_steps, bias, sticky)
    for p in range(n_fragments):
        collect(envs, actor, fragment, ctx, sticky=sticky)
        assert_fragment_equal(fragment.pyt, expected[p])
    state = fragment.pyt.state
    # fin is exactly terminated | truncated, except on the startup record
    ended = state.terminated | state.truncated
    assert torch.equal(state.fin[1:], ended[1:])


@settings(max_examples=20)
@given(n_envs=st.integers(1, 3), n_steps=st.integers(1, 5), max_len=st.integers(1, 5), limit=st.integers(1, 5))
def test_recurrent_state_restarts_with_every_episode(n_envs, n_steps, max_len, limit):
    actor = CountingActor()
    envs = seeded_envs(range(n_envs), max_len, limit)
    ctx, fragment = startup(envs, actor, prepare(CounterEnv(max_len, limit), actor, n_steps, n_envs))
    for _ in range(3):
        collect(envs, actor, fragment, ctx)
        # the counter the actor carries in hx equals the recorded step number
        state = fragment.pyt.state
        assert torch.equal(fragment.pyt.actor["count"], state.stepno.float())
        assert torch.equal(fragment.pyt.hx[0, :, 0], state.stepno[0].float())


def test_sticky_freezes_finished_envs_until_the_next_fragment():
    actor = PolicyActor()
    envs = seeded_envs([0, 1], max_len=1, limit=9)  # every episode lasts one step
    ctx, fragment = startup(envs, actor, prepare(CounterEnv(1, 9), actor, 4, 2))
    collect(envs, actor, fragment, ctx, sticky=True)
    state = fragment.pyt.state
    assert state.fin.all() and state.terminated[1:].all()
    assert torch.equal(state.rew[2:], torch.zeros(3, 2))
    assert [env.t for env in envs] == [0, 0] and [env.episodes for env in envs] == [3, 3]


def test_truncation_keeps_the_final_observation_for_bootstrapping():
    actor = PolicyActor()
    envs = seeded_envs([3], max_len=50, limit=2)
    ctx, fragment = startup(envs, actor, prepare(CounterEnv(50, 2), actor, 4, 1))
    collect(envs, actor, fragment, ctx)
    state, final_obs = fragment.pyt.state, fragment.pyt.env["final_obs"]
    t = int(state.truncated[:, 0].nonzero()[0, 0])  # record t ends the episode
    assert t == 2 and not state.terminated[t, 0]
    assert final_obs[t - 1, 0, 0] == 2.0  # the true last observation, two steps in
    assert state.obs[t, 0, 0] == 0.0  # the record holds the reset observation


def test_evaluate_returns_one_episode_return_per_env():
    # env j's episodes last exactly j + 1 steps; action 2 earns 2.5 per step
    envs = [CounterEnv(min_len=j + 1, max_len=j + 1, limit=9) for j in range(3)]
    np.testing.assert_array_equal(evaluate(envs, ConstantActor(2)), [2.5, 5.0, 7.5])
    np.testing.assert_array_equal(evaluate(envs, ConstantActor(0), n_steps=2), [0.5, 1.0, 1.0])
    with pytest.raises(ValueError, match="n_steps"):
        evaluate(envs, ConstantActor(), n_steps=0)


def test_episode_yields_true_next_states_and_episodic_rollout_whole_episodes():
    envs = seeded_envs([5, 6], max_len=3, limit=9)
    it = episode(envs, PolicyActor())
    for _ in range(6):
        cur, hx, info, nxt, env = next(it)
        assert torch.equal(nxt.obs, env["final_obs"])  # before any reset
        assert torch.equal(nxt.stepno, cur.stepno + 1)
    it.close()
    batches = episodic.rollout(seeded_envs([5, 6], max_len=3, limit=9), PolicyActor(), batch_size=3)
    for fragment in next(batches):
        stepno = fragment.state.stepno[:, 0]
        length = len(stepno) - 1
        assert torch.equal(stepno, torch.arange(length + 1))
        assert fragment.state.fin[0, 0] and fragment.state.fin[-1, 0] and not fragment.state.fin[1:-1].any()
        assert fragment.env["final_obs"].shape == (length, 1, 2)
        assert fragment.actor["value"].shape == (length + 1, 1)
    batches.close()


def test_inprocess_rollout_continues_fragments():
    envs = seeded_envs([0, 1], max_len=4, limit=3)
    it = inprocess.rollout(envs, PolicyActor(), n_steps=3)
    previous = {name: tensor.clone() for name, tensor in next(it).state._asdict().items()}
    current = next(it).state._asdict()
    for name in FIELDS:  # record 0 of a fragment repeats record T of the previous one
        assert torch.equal(current[name][0], previous[name][-1]), name


def test_vector_env_path_matches_the_list_of_envs_path():
    seeds = [11, 12, 13]
    actor = PolicyActor(bias=1)
    vector = gym.vector.SyncVectorEnv(
        [lambda: CounterEnv(4, 3) for _ in seeds], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP
    )
    vector.reset(seed=seeds[0])  # env j gets seeds[0] + j
    outputs = []
    for envs in (vector, seeded_envs(seeds, 4, 3)):
        ctx, fragment = startup(envs, actor, prepare(CounterEnv(4, 3), actor, 5, 3))
        collect(envs, actor, fragment, ctx)
        collect(envs, actor, fragment, ctx)
        outputs.append(fragment.pyt)
    for name in FIELDS:
        assert torch.equal(outputs[0].state._asdict()[name], outputs[1].state._asdict()[name]), name
    assert torch.equal(outputs[0].env["final_obs"], outputs[1].env["final_obs"])


def test_bad_input_is_rejected_before_anything_runs():
    actor = PolicyActor()
    with pytest.raises(ValueError, match="n_steps: expected a positive int, got 0"):
        prepare(CounterEnv(), actor, 0, 2)
    with pytest.raises(ValueError, match="n_envs"):
        prepare(CounterEnv(), actor, 3, -1)
    with pytest.raises(TypeError, match="envs: expected"):
        context(42)
    next_step = gym.vector.SyncVectorEnv([CounterEnv], autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP)
    with pytest.raises(ValueError, match="SAME_STEP"):
        prepare(next_step, actor, 3, 1)
    same_step = gym.vector.SyncVectorEnv([CounterEnv], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    ctx, fragment = startup(same_step, actor, prepare(CounterEnv(), actor, 3, 1))
    with pytest.raises(ValueError, match="sticky=True needs a list of envs"):
        collect(same_step, actor, fragment, ctx, sticky=True)


def test_episodic_rollout_of_a_recurrent_actor_starts_every_episode_from_h0():
    batches = episodic.rollout(seeded_envs([1, 2, 3], max_len=4, limit=9), CountingActor(), batch_size=4)
    for fragment in next(batches):
        assert torch.equal(fragment.hx, torch.zeros(1, 1, 1))
        # the counter restarts with each episode and follows its step numbers
        assert torch.equal(fragment.actor["count"][:, 0], fragment.state.stepno[:, 0].float())
    batches.close()
