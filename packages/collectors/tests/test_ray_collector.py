"""RayCollector on a real local Ray cluster, against the in-process DeviceCollector."""

import os
import signal

import pytest
import torch
from test_faults import pid_gone

# isort: split
# first: ray_testing skips this module when ray is not installed, and
# kernelgym.collectors.ray imports ray
from ray_testing import eventually, live_actor_names, ray, start_local_ray

# isort: split
import kernelgym.envs as kge
from kernelgym.collectors import WorkerCrashedError, WorkerError, WorkerRestartWarning
from kernelgym.collectors.device_collector import DeviceCollector
from kernelgym.collectors.ray import RayCollector
from kernelgym.collectors.rollout import Actor, Fragment, suply

ENV, N_ENVS, N_STEPS, SEED, LIMIT = "CartPole-v1", 4, 12, 3, 15


class LinearActor(Actor):
    """Pushes right when ``obs @ weight > 0``; recurrent step counter; raises when told."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.tensor([0.0, 0.0, 1.0, 1.0]), requires_grad=False)
        self.explode = torch.nn.Parameter(torch.tensor(0.0), requires_grad=False)

    def step(self, stepno, obs, act, rew, fin, *, hx=None, virtual=False):
        if float(self.explode):
            raise ArithmeticError("the learner sent weights that explode")
        if hx is None:
            hx = torch.zeros(1, obs.shape[1], 1)
        action = (obs @ self.weight > 0).long()
        return action, hx + 1, {"value": obs @ self.weight, "count": hx[0, :, 0].unsqueeze(0).clone()}


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    start_local_ray()


def ray_collector(actor=None, **options):
    defaults = dict(num_envs=N_ENVS, num_collectors=2, seed=SEED, num_cpus=1, timeout=60)
    defaults["env_kwargs"] = {"max_episode_steps": LIMIT}
    return RayCollector(ENV, actor or LinearActor(), N_STEPS, **(defaults | options))


def in_process(actor, index):
    """The DeviceCollector that collector actor ``index`` runs, here."""
    seed = SEED + index
    env = kge.make(ENV, N_ENVS, backend="cpu", seed=seed, autoreset_mode="same_step", max_episode_steps=LIMIT)
    return DeviceCollector(env, actor, N_STEPS, seed=seed)


def same(got, expected):
    pairs = []
    suply(lambda a, b: pairs.append(torch.equal(a, b)), got, expected)
    return all(pairs) and pairs


def joined(fragments):
    return suply(lambda *leaves: torch.cat(leaves, dim=1), *fragments)


def test_sync_fragments_are_the_in_process_collectors_joined_and_weights_reach_every_actor():
    learner = LinearActor()
    references = [in_process(LinearActor(), index) for index in range(2)]
    with ray_collector(learner) as collector:
        assert len(set(collector.worker_pids)) == 2 and set(collector.actor_names) <= live_actor_names()
        assert all(placement["device"] == "cpu" for placement in collector.placements)
        first = collector.collect()
        assert isinstance(first, Fragment) and first.state.obs.shape == (N_STEPS + 1, 2 * N_ENVS, 4)
        assert same(first, joined([reference.collect() for reference in references]))
        assert collector.loaded_weights() == [None, None]  # the initial weights

        previous = None
        for weight in ([1.0, 0.5, 0.0, 0.0], [0.0, 0.0, -1.0, 2.0]):
            learner.weight.copy_(torch.tensor(weight))
            collector.update_policy_weights_()
            ref = collector.weights_ref
            fragment = collector.collect()
            for reference in references:
                reference.actor.weight.copy_(torch.tensor(weight))
            assert same(fragment, joined([reference.collect() for reference in references]))
            # one object in the store per update, the same ref loaded by every actor
            assert collector.loaded_weights() == [ref.hex(), ref.hex()]
            assert ref.hex() != previous
            previous = ref.hex()
    assert collector.is_closed


def test_seeded_runs_reproduce():
    runs = []
    for _ in range(2):
        with ray_collector(num_collectors=1) as collector:
            runs.append([suply(torch.clone, collector.collect()) for _ in range(2)])
    assert same(runs[0], runs[1])
    assert not torch.equal(runs[0][0].state.obs, runs[0][1].state.obs)


def test_async_fragments_arrive_per_actor_in_each_actors_order():
    references = [in_process(LinearActor(), index) for index in range(2)]
    expected = [[suply(torch.clone, reference.collect()) for _ in range(3)] for reference in references]
    received = {0: [], 1: []}
    with ray_collector(sync=False) as collector:
        for fragment in collector:
            assert fragment.state.obs.shape == (N_STEPS + 1, N_ENVS, 4)
            received[collector.last_collector].append(fragment)
            if min(len(fragments) for fragments in received.values()) >= 3:
                break
        with pytest.raises(RuntimeError, match="collect\\(\\) is the sync mode's"):
            collector.collect()
    for index in range(2):
        assert same(received[index][:3], expected[index])


def test_transitions_go_into_a_kernelgym_memory_on_the_learner():
    memory_module = pytest.importorskip("kernelgym.memory")  # the `memory` extra
    memory = memory_module.Memory(memory_size=64, num_envs=2 * N_ENVS, device="cpu")
    tensors = [("states", 4, torch.float32), ("next_states", 4, torch.float32), ("actions", 1, torch.int64)]
    for name, size, dtype in tensors + [("rewards", 1, torch.float32)]:
        memory.create_tensor(name, size, dtype)
    for name in ("terminated", "truncated"):
        memory.create_tensor(name, 1, torch.bool)
    with ray_collector(memory=memory) as collector:
        fragment = collector.collect()
    assert len(memory) == N_STEPS * 2 * N_ENVS
    assert torch.equal(memory.get_tensor_by_name("states")[:N_STEPS], fragment.state.obs[:-1])
    assert torch.equal(memory.get_tensor_by_name("rewards")[:N_STEPS, :, 0], fragment.state.rew[1:])
    assert torch.equal(memory.get_tensor_by_name("next_states")[:N_STEPS], fragment.env["final_obs"])
    with pytest.raises(ValueError, match=r"memory: its num_envs must be the fragments' env count, 4"):
        ray_collector(memory=memory, sync=False)


def test_an_exception_in_the_policy_reaches_the_learner_with_its_traceback():
    learner = LinearActor()
    with ray_collector(learner) as collector:
        learner.explode.fill_(1.0)
        collector.update_policy_weights_()
        with pytest.raises(
            WorkerError, match="raised ArithmeticError: the learner sent weights that explode"
        ) as caught:
            collector.collect()
        assert "in step" in caught.value.remote_traceback and caught.value.process_index == 0
        assert isinstance(caught.value.__cause__, ArithmeticError)
        learner.explode.fill_(0.0)
        collector.update_policy_weights_()
        assert collector.collect().state.obs.shape[1] == 2 * N_ENVS  # the actors live on


class OutOfSpaceActor(LinearActor):
    """LinearActor that gives env 1 the action 7 (outside Discrete(2)) while ``bad`` is set."""

    def __init__(self):
        super().__init__()
        self.bad = torch.nn.Parameter(torch.tensor(0.0), requires_grad=False)

    def step(self, stepno, obs, act, rew, fin, *, hx=None, virtual=False):
        action, hx, info = super().step(stepno, obs, act, rew, fin, hx=hx, virtual=virtual)
        if float(self.bad) and not virtual:
            action = action.clone()
            action[0, 1] = 7
        return action, hx, info


def test_a_deferred_bad_action_reaches_the_learner_by_the_end_of_its_fragment():
    # the actors' DeviceCollector reads the env's deferred check once per fragment
    learner = OutOfSpaceActor()
    kwargs = {"max_episode_steps": LIMIT, "check_action_values": "deferred"}
    with ray_collector(learner, env_kwargs=kwargs) as collector:
        collector.collect()
        learner.bad.fill_(1.0)
        collector.update_policy_weights_()
        with pytest.raises(
            WorkerError,
            match=r"raised ValueError: actions: expected values in Discrete\(2\), "
            r"got 7 at index \(1,\)",
        ) as caught:
            collector.collect()
        assert isinstance(caught.value.__cause__, ValueError)
        learner.bad.fill_(0.0)
        collector.update_policy_weights_()
        assert collector.collect().state.obs.shape[1] == 2 * N_ENVS  # the actors live on


@pytest.mark.timeout(90)
def test_a_killed_collector_stops_all_and_leaves_no_actor():
    collector = ray_collector()
    names, pids = set(collector.actor_names), collector.worker_pids
    collector.collect()
    os.kill(pids[1], signal.SIGKILL)
    with pytest.raises(WorkerCrashedError, match=f"Ray actor 1 .*pid {pids[1]}.* died") as caught:
        collector.collect()
    assert caught.value.process_index == 1 and isinstance(caught.value.__cause__, ray.exceptions.RayActorError)
    assert collector.is_closed and not names & live_actor_names()
    assert eventually(lambda: all(pid_gone(pid) for pid in pids))
    with pytest.raises(RuntimeError, match="is closed"):
        collector.collect()


@pytest.mark.timeout(120)
def test_restart_on_failure_resumes_collection_with_a_warning():
    with ray_collector(num_collectors=1, restart_on_failure=True, max_restarts=1) as collector:
        first = suply(torch.clone, collector.collect())
        old = collector.worker_pids[0]
        os.kill(old, signal.SIGKILL)
        with pytest.warns(WorkerRestartWarning, match="died"):
            again = collector.collect()
        assert collector.worker_pids[0] not in (None, old)
        assert same(again, first)  # the restarted actor starts again from its seed
        os.kill(collector.worker_pids[0], signal.SIGKILL)  # max_restarts=1: no second life
        with pytest.raises(WorkerError, match="restarting Ray actor 0 .* failed"):
            collector.collect()
        assert collector.is_closed


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        (
            {"num_gpus": 1},
            ValueError,
            r"num_gpus: 2 collector actors x 1 GPU each need 2 GPU, but the Ray cluster has 0",
        ),
        ({"num_envs": 0}, ValueError, "num_envs: expected a positive int, got 0"),
        ({"timeout": -1}, ValueError, "timeout: expected a positive number"),
        ({"timeout": float("inf")}, ValueError, r"timeout: expected a positive number .*, got inf"),
        ({"timeout": True}, ValueError, "timeout: expected a positive number .*, got True"),
        ({"num_cpus": float("nan")}, ValueError, r"num_cpus: expected a number >= 0 .*, got nan"),
        ({"num_gpus": float("inf")}, ValueError, r"num_gpus: expected a number >= 0 .*, got inf"),
        ({"seed": "3"}, TypeError, "seed: expected an int or None"),
        ({"actor": object()}, TypeError, "actor: expected an Actor"),
    ],
)
def test_bad_arguments_fail_before_any_actor_starts(options, error, match):
    before = live_actor_names()
    with pytest.raises(error, match=match):
        ray_collector(**options)
    assert live_actor_names() == before


def test_start_up_has_its_own_allowance_and_after_the_users_ray_shutdown_every_call_says_so():
    """One cluster restart for both (Ray restarts are slow): placing two actors, importing
    and making their envs takes far longer than a 0.05 s timeout, yet healthy actors
    starting up are not reported hung (the timeout is for fragments); after the user's own
    ray.shutdown() every call says so, also once a new Ray session runs, and close() works."""
    from test_vector_tasks import CounterSampler

    from kernelgym.collectors.ray import RayVectorSampledTasks

    collector = ray_collector(timeout=0.05)
    tasks = RayVectorSampledTasks(CounterSampler, [{"sampler_id": 0}], num_cpus=0.25, read_timeout=0.05)
    try:
        assert len(collector.placements) == 2 and len(tasks.get_observations()) == 1
        ray.shutdown()
        calls = (collector.collect, collector.update_policy_weights_, tasks.get_observations, lambda: tasks.step([1]))
        for call in calls:
            with pytest.raises(RuntimeError, match=r"Ray was shut down \(ray.shutdown\(\)\) after it started them"):
                call()
        start_local_ray()  # a new Ray session: the old actors are still gone
        with pytest.raises(RuntimeError, match="Ray was shut down"):
            collector.collect()
        collector.close()
        tasks.close()
        assert collector.is_closed and tasks.is_closed
    finally:
        start_local_ray()
