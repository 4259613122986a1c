"""examples/minatar_breakout_ppo.py: PPO on MinAtar Breakout with kernelgym's env, collector and memory."""

from __future__ import annotations

import contextlib
import io
import math
import pathlib
import sys

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("kernelgym.minatar")
pytest.importorskip("kernelgym.collectors")
pytest.importorskip("kernelgym.memory")

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"
sys.path.insert(0, str(EXAMPLES))
import minatar_breakout_ppo as example  # noqa: E402

sys.path.remove(str(EXAMPLES))

# two updates of 16 envs x 32 steps: random Breakout episodes last ~10-20 steps, so many end
TINY = ["--total-frames", "1024", "--num-envs", "16", "--num-steps", "32", "--num-minibatches", "2", "--seed", "3"]
TINY += ["--eval-episodes", "8", "--eval-max-steps", "200"]


@pytest.fixture(scope="module")
def run():
    """One tiny training run: (its log, what it printed)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        log = example.main(TINY)
    return log, out.getvalue()


def test_the_example_trains_from_its_command_line(run):
    log, _ = run
    # the collector saw num_envs * num_steps frames per update
    assert log.frames == [512, 1024]
    assert len(log.policy_losses) == len(log.value_losses) == 2
    assert all(math.isfinite(x) for x in log.policy_losses + log.value_losses + log.entropies)
    # episodes ended and their returns were logged: Breakout pays 0 or +1 per brick
    assert len(log.episode_returns) > 16
    assert all(r >= 0 and float(r).is_integer() for r in log.episode_returns)
    assert log.mean_returns[-1] == pytest.approx(sum(log.episode_returns[-100:]) / len(log.episode_returns[-100:]))
    # the entropy of a near-uniform 3-action policy after two small updates
    assert 0.5 < log.entropies[-1] <= math.log(3) + 1e-6
    # one greedy episode per evaluation env, each ended or cut at 200 steps
    assert len(log.greedy_returns) == 8
    assert all(r >= 0 and float(r).is_integer() for r in log.greedy_returns)


def test_progress_and_the_final_line_are_printed(run):
    log, out = run
    lines = out.strip().splitlines()
    assert len(lines) == 2  # the last update's progress line, then the summary
    fields = dict(item.split("=") for item in lines[-1].split())
    assert fields["frames"] == "1024"
    assert float(fields["mean_return_last_100"]) == pytest.approx(log.mean_returns[-1], abs=0.005)
    assert float(fields["greedy_mean_return"]) == pytest.approx(sum(log.greedy_returns) / 8, abs=0.005)
    assert int(fields["episodes"]) == len(log.episode_returns)


def test_unknown_arguments_are_refused():
    with pytest.raises(SystemExit):
        example.parse_args(["--total-frame", "10"])


@settings(max_examples=25, deadline=None)
@given(
    rewards=st.lists(st.floats(-1, 1), min_size=1, max_size=12),
    bootstrap=st.floats(-5, 5),
    gamma=st.floats(0.5, 1.0),
)
def test_returns_without_episode_ends_and_lambda_1_are_discounted_sums(rewards, bootstrap, gamma):
    """GAE(lambda=1) over an unbroken fragment telescopes to the n-step return from the last value."""
    T = len(rewards)
    r = torch.tensor(rewards, dtype=torch.float64).view(T, 1)
    values = torch.linspace(-1, 1, T + 1, dtype=torch.float64).view(T + 1, 1)
    values[-1] = bootstrap
    zeros = torch.zeros(T, 1, dtype=torch.float64)
    _, returns = example.advantages_and_returns(r, values, zeros, gamma, 1.0)
    for t in range(T):
        expected = sum(gamma**k * rewards[t + k] for k in range(T - t)) + gamma ** (T - t) * bootstrap
        assert returns[t, 0].item() == pytest.approx(expected, abs=1e-9)


def test_an_episode_end_stops_the_bootstrap_and_the_advantage_flow():
    rewards = torch.tensor([[0.0], [1.0], [0.0]])
    values = torch.tensor([[0.5], [0.5], [9.0], [9.0]])
    over = torch.tensor([[0.0], [1.0], [0.0]])  # the episode ends at step 1 (terminated)
    advantages, returns = example.advantages_and_returns(rewards, values, over, 0.9, 0.95)
    assert returns[1, 0].item() == pytest.approx(1.0)  # no value of the next episode's start
    # step 0 sees its own episode only: delta_0 = 0 + 0.9 * 0.5 - 0.5, then lambda-discounted delta_1
    delta0, delta1 = 0.9 * 0.5 - 0.5, 1.0 - 0.5
    assert advantages[0, 0].item() == pytest.approx(delta0 + 0.9 * 0.95 * delta1)
    assert returns[2, 0].item() == pytest.approx(0.9 * 9.0)


def test_the_memory_hands_back_the_log_probs_the_agent_recorded():
    """Before any update the PPO ratio is exactly 1: obs, actions and log-probs stay aligned."""
    args = example.Args(num_envs=16, num_steps=32, seed=5)
    env, agent, _, collector, memory = example.setup(args)
    try:
        example.store_fragment(collector.collect(), agent, memory, args)
        ((obs, actions, old_log_probs, _, _),) = memory.sample(example.NAMES, batch_size=16 * 32)
        with torch.no_grad():
            policy, _ = agent(obs)
        assert torch.equal(policy.log_prob(actions.squeeze(-1)), old_log_probs.squeeze(-1))
    finally:
        env.close()
