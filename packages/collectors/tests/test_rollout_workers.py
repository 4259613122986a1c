"""The multi-process rollouts: records, parameter updates, seeding, faults, shutdown."""

from __future__ import annotations

import multiprocessing
import signal
import time

import gymnasium as gym
import numpy as np
import pytest
import torch
from numpy.random import SeedSequence
from test_rollout_core import FIELDS, assert_fragment_equal, reference_fragments, seeded_envs
from test_rollout_envs import ConstantActor, CounterEnv, PolicyActor, counter_factory

from kernelgym.collectors import WorkerCrashedError, WorkerError, WorkerTimeoutError
from kernelgym.collectors.rollout import double, evaluation, pool
from kernelgym.collectors.rollout.worker_setup import env_seeds

MAX_LEN, LIMIT, N_STEPS = 4, 3, 5
# these envs and actors use no OpenMP threads, so the quickest start method is safe
FORK = {"start_method": "fork"}

# A hang is detected by the timeout itself (1.5 s); every other run must finish or fail
# by its own mechanism, so it gets a timeout that a loaded machine's slow start cannot reach.
HANG_TIMEOUT, SAFE_TIMEOUT = 1.5, 30.0


def no_children_left():
    return multiprocessing.active_children() == []


def split(batch, n_per_batch):
    """The ``n_per_batch`` fragments stacked along dim 1 of a pool batch."""
    n = batch.state.fin.shape[1] // n_per_batch
    return [
        {
            **{name: getattr(batch.state, name)[:, j * n : (j + 1) * n] for name in FIELDS},
            "final_obs": batch.env["final_obs"][:, j * n : (j + 1) * n],
            "value": batch.actor["value"][:, j * n : (j + 1) * n],
        }
        for j in range(n_per_batch)
    ]


def as_fragment(parts):
    from kernelgym.collectors.rollout import Fragment, State

    state = State(**{name: parts[name] for name in FIELDS})
    return Fragment(state, {"value": parts["value"]}, {"final_obs": parts["final_obs"]}, ())


def test_double_rollout_records_match_the_plain_model_and_are_reproducible():
    runs = []
    for _ in range(2):
        batches = double.rollout(
            counter_factory(MAX_LEN, LIMIT), PolicyActor(1), N_STEPS, 3, entropy=42, timeout=SAFE_TIMEOUT, **FORK
        )
        runs.append([suply_clone(batch) for _, batch in zip(range(3), batches)])
        batches.close()
    expected = reference_fragments(seeded_envs(env_seeds(SeedSequence(42), 3), MAX_LEN, LIMIT), 3, N_STEPS, 1)
    for p, fragment in enumerate(runs[0]):
        assert_fragment_equal(fragment, expected[p])
    for a, b in zip(*runs):
        assert all(torch.equal(x, y) for x, y in zip(a.state, b.state))
    assert no_children_left()


def suply_clone(fragment):
    from kernelgym.collectors.rollout import suply

    return suply(torch.clone, fragment)


def test_double_rollout_publishes_new_parameters_one_fragment_later():
    actor = PolicyActor(0)
    batches = double.rollout(
        counter_factory(MAX_LEN, LIMIT), actor, N_STEPS, 2, entropy=1, timeout=SAFE_TIMEOUT, **FORK
    )
    fragments = []
    for batch in batches:
        fragments.append(suply_clone(batch))
        actor.bias.data.fill_(1.0)  # the learner's update
        if len(fragments) == 3:
            break
    batches.close()
    for fragment, bias in zip(fragments, (0, 0, 1)):  # 2 was collected during 1's training
        state = fragment.state
        taken = (state.obs[:-1, :, 0] + state.obs[:-1, :, 1] + bias).long() % 3
        assert torch.equal(state.act[1:], taken)
    assert no_children_left()


def test_pool_with_one_actor_stacks_consecutive_fragments():
    n_per_batch = 2
    batches = pool.rollout(
        counter_factory(MAX_LEN, LIMIT),
        PolicyActor(2),
        N_STEPS,
        n_actors=1,
        n_per_actor=3,
        n_buffers=3,
        n_per_batch=n_per_batch,
        entropy=9,
        timeout=SAFE_TIMEOUT,
        **FORK,
    )
    received = [as_fragment(part) for _, batch in zip(range(2), batches) for part in split(suply_clone(batch), 2)]
    batches.close()
    seeds = env_seeds(SeedSequence(9).spawn(1)[0], 3)
    expected = reference_fragments(seeded_envs(seeds, MAX_LEN, LIMIT), 4, N_STEPS, 2)
    for p, fragment in enumerate(received):
        assert_fragment_equal(fragment, expected[p])
    assert no_children_left()


def test_pool_with_two_actors_keeps_each_workers_fragments_in_order():
    n_actors, n_per_actor = 2, 2
    batches = pool.rollout(
        counter_factory(MAX_LEN, LIMIT),
        PolicyActor(0),
        N_STEPS,
        n_actors=n_actors,
        n_per_actor=n_per_actor,
        n_buffers=4,
        n_per_batch=2,
        entropy=5,
        timeout=SAFE_TIMEOUT,
        **FORK,
    )
    received = [as_fragment(part) for _, batch in zip(range(3), batches) for part in split(suply_clone(batch), 2)]
    batches.close()
    expected = [
        reference_fragments(seeded_envs(env_seeds(ss, n_per_actor), MAX_LEN, LIMIT), 6, N_STEPS, 0)
        for ss in SeedSequence(5).spawn(n_actors)
    ]
    position = [0] * n_actors
    for fragment in received:
        matches = [
            w for w in range(n_actors) if np.array_equal(fragment.state.obs.numpy(), expected[w][position[w]]["obs"])
        ]
        assert len(matches) == 1, "every fragment is the next one of exactly one worker"
        w = matches[0]
        assert_fragment_equal(fragment, expected[w][position[w]])
        position[w] += 1
    assert no_children_left()


def test_pool_takes_a_vector_env_per_worker():
    def factory(seed=None):
        return gym.vector.SyncVectorEnv(
            [lambda: CounterEnv(MAX_LEN, LIMIT) for _ in range(4)], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP
        )

    batches = pool.rollout(
        factory,
        ConstantActor(1),
        N_STEPS,
        n_actors=2,
        n_per_actor=4,
        n_buffers=2,
        n_per_batch=2,
        entropy=0,
        timeout=SAFE_TIMEOUT,
        **FORK,
    )
    batch = next(batches)
    state = batch.state
    assert state.obs.shape == (N_STEPS + 1, 8, 2)
    assert torch.equal(state.rew[1:], torch.full((N_STEPS, 8), 1.5))  # action 1 everywhere
    assert torch.equal(state.fin[1:], state.terminated[1:] | state.truncated[1:])
    batches.close()
    assert no_children_left()


def test_pool_runs_under_the_default_forkserver_with_a_closure_factory():
    max_len = 2  # captured by the closure: the factory travels by cloudpickle
    batches = pool.rollout(
        lambda seed=None: CounterEnv(max_len, 9),
        ConstantActor(2),
        3,
        n_actors=1,
        n_per_actor=1,
        n_buffers=1,
        n_per_batch=1,
        timeout=30,
    )
    batch = next(batches)
    assert torch.equal(batch.state.rew[1:, 0], torch.full((3,), 2.5))
    batches.close()
    assert no_children_left()


def test_background_evaluation_returns_episode_returns():
    factory = lambda seed=None: CounterEnv(min_len=3, max_len=3, limit=9)  # noqa: E731
    results = evaluation.evaluate(factory, ConstantActor(2), n_envs=2, entropy=0, timeout=SAFE_TIMEOUT, **FORK)
    for _, returns in zip(range(2), results):
        np.testing.assert_array_equal(returns, [7.5, 7.5])
    results.close()
    assert no_children_left()


def run_double(factory, timeout):
    batches = double.rollout(factory, PolicyActor(), N_STEPS, 2, entropy=0, timeout=timeout, **FORK)
    return [next(batches) for _ in range(3)]


def run_pool(factory, timeout):
    batches = pool.rollout(
        factory,
        PolicyActor(),
        N_STEPS,
        n_actors=2,
        n_per_actor=2,
        n_buffers=2,
        n_per_batch=1,
        entropy=0,
        timeout=timeout,
        **FORK,
    )
    return [next(batches) for _ in range(3)]


def run_evaluation(factory, timeout):
    results = evaluation.evaluate(factory, PolicyActor(), n_envs=2, entropy=0, timeout=timeout, **FORK)
    return [next(results) for _ in range(3)]


VARIANTS = {"double": run_double, "pool": run_pool, "evaluation": run_evaluation}


def fault_error(variant, fault, error_type, match):
    """The error a rollout of ``variant`` raises when its worker meets ``fault``; it must
    come within 5 s and leave no child process."""
    timeout = HANG_TIMEOUT if fault == "hang" else SAFE_TIMEOUT
    start = time.monotonic()
    with pytest.raises(error_type, match=match) as caught:
        VARIANTS[variant](counter_factory(MAX_LEN, LIMIT, fault=fault), timeout)
    assert time.monotonic() - start < 5
    assert no_children_left()
    return caught.value


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_worker_that_raises_surfaces_its_traceback(variant):
    error = fault_error(variant, "raise", WorkerError, "injected failure in CounterEnv.step")
    assert type(error) is WorkerError and f"rollout worker {variant}-" in str(error)
    assert "Traceback" in error.remote_traceback and "(exit code 1)" in error.message
    assert error.worker.startswith(f"{variant}-")


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_killed_worker_surfaces_its_signal(variant):
    error = fault_error(variant, "sigkill", WorkerCrashedError, "died of SIGKILL")
    assert error.signal == signal.SIGKILL and error.exitcode == -signal.SIGKILL
    assert error.remote_traceback is None


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_hung_worker_times_out(variant):
    error = fault_error(variant, "hang", WorkerTimeoutError, "nothing within 1.5 s; workers still alive")
    assert isinstance(error, TimeoutError)


def healthy_rollout(variant):
    """A rollout of ``variant`` over healthy envs, with a timeout no healthy run reaches."""
    if variant == "evaluation":
        return evaluation.evaluate(
            counter_factory(MAX_LEN, LIMIT), PolicyActor(), n_envs=2, timeout=SAFE_TIMEOUT, **FORK
        )
    if variant == "double":
        return double.rollout(counter_factory(MAX_LEN, LIMIT), PolicyActor(), N_STEPS, 2, timeout=SAFE_TIMEOUT, **FORK)
    return pool.rollout(
        counter_factory(MAX_LEN, LIMIT),
        PolicyActor(),
        N_STEPS,
        n_actors=2,
        n_per_actor=2,
        n_buffers=3,
        n_per_batch=1,
        timeout=SAFE_TIMEOUT,
        **FORK,
    )


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_learner_that_stops_mid_rollout_leaves_no_child(variant):
    batches = healthy_rollout(variant)
    for count, _ in enumerate(batches):
        if count == 1:
            break  # the learner has had enough
    start = time.monotonic()
    batches.close()
    assert time.monotonic() - start < 3
    assert no_children_left()


def test_bad_arguments_are_rejected_before_any_worker_starts():
    factory = counter_factory()
    with pytest.raises(ValueError, match="n_buffers: expected at least n_actors=4 buffers, got 2"):
        next(pool.rollout(factory, PolicyActor(), 3, n_actors=4, n_buffers=2, n_per_batch=1))
    with pytest.raises(ValueError, match="n_per_batch: expected at most n_buffers=2, got 3"):
        next(pool.rollout(factory, PolicyActor(), 3, n_actors=1, n_buffers=2, n_per_batch=3))
    with pytest.raises(ValueError, match="timeout"):
        next(double.rollout(factory, PolicyActor(), 3, 2, timeout=0))
    with pytest.raises(ValueError, match="start_method"):
        next(double.rollout(factory, PolicyActor(), 3, 2, start_method="teleport"))
    with pytest.raises(ValueError, match="n_envs"):
        next(evaluation.evaluate(factory, PolicyActor(), n_envs=0))
    assert no_children_left()


def _learner(variant, pids):
    """A learner process that reports its workers' pids and then keeps training."""
    batches = healthy_rollout(variant)
    next(batches)
    pids.put([process.pid for process in multiprocessing.active_children()])
    time.sleep(60)  # "training" until killed


def _gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] in "ZX"  # exited, awaiting its reaper
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("variant", ["double", "pool"])
def test_workers_exit_when_their_learner_is_killed(variant):
    mp = multiprocessing.get_context("fork")
    pids = mp.Queue()
    learner = mp.Process(target=_learner, args=(variant, pids))
    learner.start()
    workers = pids.get(timeout=60)
    assert workers
    learner.kill()
    learner.join(5)
    deadline = time.monotonic() + 3
    while not all(_gone(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(_gone(pid) for pid in workers)
