"""examples/recurrent_ppo_gru.py: a GRU actor-critic with DeviceCollector's hx and SequenceMemory."""

from __future__ import annotations

import math
import pathlib
import sys

import pytest
import torch

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"
sys.path.insert(0, str(EXAMPLES))
import recurrent_ppo_gru as example  # noqa: E402

sys.path.remove(str(EXAMPLES))

# small: a few hundred env steps, two minibatches per epoch
CONFIG = example.Config(seed=3, num_envs=8, n_steps=32, sequences=32, mini_batches=2, epochs=2)


@pytest.fixture(scope="module")
def rollout():
    env, agent, optimizer, collector, memory = example.setup(CONFIG)
    fragment = collector.collect()
    yield agent, optimizer, fragment, memory
    env.close()


def test_the_hidden_state_restarts_where_an_episode_ends(rollout):
    _, _, fragment, _ = rollout
    fin = fragment.state.fin  # fin[t]: obs[t] starts an episode (all set at the very start)
    hx_norm = fragment.actor["hx_norm"]  # the size of the state the collector gave the actor at t
    assert fin[0].all() and fin[1:].any(), "the fragment should hold episode ends"
    assert (hx_norm[fin] == 0).all()
    assert (hx_norm[~fin] > 0).all()  # carried on within an episode, and across steps
    assert fragment.hx.shape == (1, CONFIG.num_envs, CONFIG.hidden_size)


def test_sequences_have_the_expected_shapes_and_stay_in_one_episode(rollout):
    _, _, fragment, memory = rollout
    example.store_fragment(fragment, memory, CONFIG)
    steps = CONFIG.burn_in + CONFIG.sequence_length
    ((obs, actions, log_probs, advantages, returns, valid),) = memory.sample(example.NAMES, batch_size=20)
    assert obs.shape == (20, steps, 4) and obs.dtype == torch.float32
    assert actions.shape == (20, steps, 1) and actions.dtype == torch.int64
    for column in (log_probs, advantages, returns):
        assert column.shape == (20, steps, 1)
    assert valid.shape == (20, steps) and valid.dtype == torch.bool
    # the valid steps of a sequence are one run (one episode), so a state started at its
    # first step is an episode's; the burn-in's first steps may lie before the episode
    for row in valid:
        cells = torch.nonzero(row).flatten()
        assert len(cells) > 0 and (cells.diff() == 1).all()
    assert valid[:, CONFIG.burn_in].all()  # the first trained step is always written data
    starts = example.run_starts(valid.transpose(0, 1))
    assert starts[0].all()


def test_updates_on_a_fixed_memory_reduce_the_value_loss(rollout):
    agent, optimizer, fragment, memory = rollout
    example.store_fragment(fragment, memory, CONFIG)
    config = example.Config(**{**vars(CONFIG), "epochs": 30, "mini_batches": 1, "sequences": 64})
    log = example.TrainLog()
    example.update(agent, optimizer, memory, config, log)
    assert all(math.isfinite(loss) for loss in log.value_losses + log.policy_losses)
    # the critic regresses onto fixed returns: its loss falls (seeded, so not flaky)
    assert sum(log.value_losses[-3:]) < 0.6 * sum(log.value_losses[:3])


def test_the_example_runs_from_its_command_line(capsys):
    example.main(["--env-steps", "512", "--seed", "1"])
    out = capsys.readouterr().out
    assert "512 env steps: mean episode return" in out
    mean_return = float(out.strip().split()[-1])
    assert 5 < mean_return < 200  # random-ish CartPole episodes
