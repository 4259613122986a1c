"""RayVectorSampledTasks on a real local Ray cluster, against VectorSampledTasks."""

import math
import os
import signal
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from test_faults import HANG, RAISE, UNPICKLABLE, FaultSampler, pid_gone
from test_vector_tasks import CounterSampler, sampler_specs

# isort: split
# first: ray_testing skips this module when ray is not installed, and
# kernelgym.collectors.ray imports ray
from ray_testing import eventually, live_actor_names, ray, start_local_ray

# isort: split
from kernelgym.collectors import (
    GymTaskSampler,
    SingleProcessVectorSampledTasks,
    VectorSampledTasks,
    WorkerCrashedError,
    WorkerError,
    WorkerRestartWarning,
    WorkerTimeoutError,
)
from kernelgym.collectors.ray import RayVectorSampledTasks


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    start_local_ray()


def ray_tasks(make, specs, **options):
    """Small actors (a quarter CPU each), so that several fit on the test cluster."""
    return RayVectorSampledTasks(make, specs, **({"num_cpus": 0.25, "read_timeout": 30} | options))


class SameAsVectorSampledTasks(RuleBasedStateMachine):
    """Random sequences of the seed API on both classes: every answer must be identical."""

    @initialize(specs=sampler_specs, auto=st.booleans(), max_processes=st.integers(1, 3))
    def start(self, specs, auto, max_processes):
        specs = [dict(spec, sampler_id=i) for i, spec in enumerate(specs)]
        # never "fork" a process that runs Ray: a child of its gRPC threads can deadlock
        self.reference = VectorSampledTasks(
            CounterSampler, specs, auto, multiprocessing_start_method="forkserver", max_processes=max_processes
        )
        self.tasks = ray_tasks(CounterSampler, specs, auto_resample_when_done=auto, max_processes=max_processes)
        assert self.tasks.num_processes == self.reference.num_processes

    def teardown(self):
        for tasks in (getattr(self, "reference", None), getattr(self, "tasks", None)):
            if tasks is not None:
                tasks.close()
                assert tasks.is_closed

    def both(self, method, *args):
        expected = getattr(self.reference, method)(*args)
        assert getattr(self.tasks, method)(*args) == expected
        return expected

    def actions(self, data):
        count = self.reference.num_unpaused_tasks
        return data.draw(st.lists(st.integers(0, 4), min_size=count, max_size=count))

    def index(self, data):
        return data.draw(st.integers(0, self.reference.num_unpaused_tasks - 1))

    @rule(data=st.data())
    def step(self, data):
        self.both("step", self.actions(data))

    @rule(data=st.data())
    def async_step_then_wait_step(self, data):
        actions = self.actions(data)
        self.reference.async_step(actions)
        self.tasks.async_step(actions)
        assert self.tasks.wait_step() == self.reference.wait_step()

    @precondition(lambda self: self.reference.num_unpaused_tasks)
    @rule(data=st.data(), action=st.integers(0, 4))
    def step_at(self, data, action):
        self.both("step_at", self.index(data), action)

    @rule()
    def next_task(self):
        self.both("next_task")

    @precondition(lambda self: self.reference.num_unpaused_tasks)
    @rule(data=st.data())
    def next_task_at(self, data):
        self.both("next_task_at", self.index(data))

    @precondition(lambda self: self.reference.num_unpaused_tasks)
    @rule(data=st.data())
    def pause_at(self, data):
        self.both("pause_at", self.index(data))

    @rule()
    def resume_all(self):
        self.both("resume_all")

    @rule(data=st.data())
    def set_seeds(self, data):
        count = self.reference.num_unpaused_tasks
        self.both("set_seeds", data.draw(st.lists(st.integers(0, 99), min_size=count, max_size=count)))

    @rule()
    def reset_all(self):
        self.both("reset_all")

    @precondition(lambda self: self.reference.num_unpaused_tasks)
    @rule(data=st.data(), factor=st.integers(-3, 3))
    def call_and_attr(self, data, factor):
        count = self.reference.num_unpaused_tasks
        try:
            expected = self.reference.call("scaled", [[factor]] * count)
        except WorkerError as reference_error:  # an exhausted sampler has no task to call
            with pytest.raises(WorkerError) as caught:
                self.tasks.call("scaled", [[factor]] * count)
            assert caught.value.sampler_indices == reference_error.sampler_indices
            return
        assert self.tasks.call("scaled", [[factor]] * count) == expected
        self.both("attr", "sampler_id")

    @precondition(lambda self: self.reference.num_unpaused_tasks)
    @rule(data=st.data(), command=st.sampled_from(["sampler_attr", "sampler_call", "get_observations"]))
    def command_at(self, data, command):
        argument = {"sampler_attr": "count", "sampler_call": ("set_seed", [7]), "get_observations": None}[command]
        self.both("command_at", self.index(data), command, argument)

    @invariant()
    def same_observations(self):
        if hasattr(self, "tasks"):
            assert self.tasks.num_unpaused_tasks == self.reference.num_unpaused_tasks
            assert self.tasks.get_observations() == self.reference.get_observations()


TestSameAsVectorSampledTasks = SameAsVectorSampledTasks.TestCase
TestSameAsVectorSampledTasks.settings = settings(max_examples=8, stateful_step_count=20, deadline=None)


# -- examples of the documented behaviour ------------------------------------------------------


def test_calls_attributes_render_and_layout():
    specs = [{"sampler_id": i} for i in range(3)]
    with ray_tasks(CounterSampler, specs, max_processes=2) as tasks:
        assert tasks.num_processes == 2 and len(set(tasks.worker_pids)) == 2
        assert set(tasks.actor_names) <= live_actor_names()
        assert tasks.call(["scaled", "get_observations", "scaled"], [[1], None, [1]]) == [0, (1, 0, 1, 0), 2]
        assert tasks.attr_at(2, "number") == 1 and tasks.call_at(1, "scaled", [10]) == 10
        tasks.pause_at(0)
        assert tasks.attr("sampler_id") == [1, 2]  # indices shifted down
        with pytest.raises(ValueError, match=r"sampler_index must be in \[0, 2\)"):
            tasks.attr_at(2, "number")
        tasks.resume_all()
        tile = tasks.render("rgb_array")
        assert tile.shape == (4, 6, 3) and tile[0, 0, 0] == 1 and tile[0, 3, 0] == 2 and tile[2, 0, 0] == 3
        assert [frame[0, 0, 0] for frame in tasks.render("raw_rgb_list")] == [1, 2, 3]
    assert tasks.is_closed
    with pytest.raises(RuntimeError, match="is closed"):
        tasks.step([0, 0, 0])


def test_seeded_gym_tasks_match_in_process_results():
    args = [{"env": "CartPole-v1", "seed": 10 + i} for i in range(3)]

    def observations(tasks, steps):
        rows = [np.array(tasks.get_observations())]
        for step in range(steps):
            results = tasks.step(np.array([(step + k) % 2 for k in range(tasks.num_unpaused_tasks)]))
            rows.append(np.array([r.observation for r in results]))
        return np.stack(rows)

    with SingleProcessVectorSampledTasks(GymTaskSampler, args) as tasks:
        reference = observations(tasks, 40)
    # a lambda travels too (cloudpickled)
    make = lambda env, seed: GymTaskSampler(env, seed=seed)  # noqa: E731
    with ray_tasks(make, args, max_processes=2) as tasks:
        np.testing.assert_array_equal(observations(tasks, 40), reference)


def test_closing_leaves_no_actor_behind():
    tasks = ray_tasks(CounterSampler, [{"sampler_id": i} for i in range(4)], max_processes=2)
    names, pids, handles = set(tasks.actor_names), tasks.worker_pids, [host.actor for host in tasks._hosts]
    assert names <= live_actor_names()
    tasks.async_step([1, 1, 1, 1])  # a step still under way is abandoned
    tasks.close()
    assert not names & live_actor_names()
    for handle in handles:
        with pytest.raises(ray.exceptions.RayActorError):
            ray.get(handle.ready.remote(), timeout=30)
    assert eventually(lambda: all(pid_gone(pid) for pid in pids))
    tasks.close()  # closing again is harmless


# -- faults ------------------------------------------------------------------------------------


def test_an_exception_in_a_sampler_reaches_the_caller_with_its_traceback():
    with ray_tasks(FaultSampler, [{"sampler_id": i} for i in range(3)], max_processes=2) as tasks:
        with pytest.raises(WorkerError, match="sampler 2 raised ValueError: boom in sampler 2") as caught:
            tasks.step([0, 0, RAISE])
        error = caught.value
        assert (error.sampler_index, error.process_index) == (2, 1)
        assert "_step" in error.remote_traceback and "boom in sampler 2" in error.remote_traceback
        assert isinstance(error.__cause__, ValueError)
        with pytest.raises(WorkerError, match="UnpicklableError") as caught:
            tasks.step([UNPICKLABLE, 0, 0])  # its traceback comes back, the exception cannot
        assert "holds a lock" in caught.value.remote_traceback and caught.value.sampler_index == 0
        assert [r.observation for r in tasks.step([0, 0, 0])] == [
            (0, 1, 2),
            (1, 1, 3),
            (2, 1, 2),
        ]  # still usable; a failed step counts for nothing


def test_a_sampler_that_cannot_be_made_fails_the_constructor_and_leaves_no_actor():
    before = live_actor_names()
    specs = [{"sampler_id": 0}, {"sampler_id": 1, "fail_on_create": True}]
    with pytest.raises(WorkerError, match="sampler 1 raised KeyError") as caught:
        ray_tasks(FaultSampler, specs, max_processes=2)
    assert "no scene for sampler 1" in caught.value.remote_traceback
    assert live_actor_names() == before


@pytest.mark.timeout(60)
@pytest.mark.parametrize("read_timeout", [10, None])
def test_an_actor_killed_by_its_pid_is_reported_at_once_and_everything_stops(read_timeout):
    tasks = ray_tasks(FaultSampler, [{"sampler_id": i} for i in range(3)], max_processes=2, read_timeout=read_timeout)
    names, pids = set(tasks.actor_names), tasks.worker_pids
    os.kill(pids[1], signal.SIGKILL)
    started = time.monotonic()
    with pytest.raises(WorkerCrashedError) as caught:
        tasks.step([0, 0, 0])
    assert time.monotonic() - started < 10  # Ray reports the death; no read_timeout needed
    error = caught.value
    assert (error.process_index, error.sampler_indices, error.sampler_index) == (1, (2,), 2)
    assert f"pid {pids[1]}" in str(error) and "died" in str(error) and not error.restarted
    assert isinstance(error.__cause__, ray.exceptions.RayActorError)
    assert tasks.is_closed and not names & live_actor_names()
    assert eventually(lambda: all(pid_gone(pid) for pid in pids))


@pytest.mark.timeout(60)
def test_a_hung_actor_times_out_and_is_stopped():
    tasks = ray_tasks(FaultSampler, [{"sampler_id": i} for i in range(3)], max_processes=2, read_timeout=2.0)
    names = set(tasks.actor_names)
    with pytest.raises(WorkerTimeoutError, match="did not answer within 2.0 s") as caught:
        tasks.step([0, 0, HANG])
    assert isinstance(caught.value, TimeoutError) and caught.value.sampler_index == 2
    assert tasks.is_closed and not names & live_actor_names()


@pytest.mark.timeout(120)
def test_restart_on_failure_makes_the_actor_again_and_keeps_paused_tasks_paused():
    tasks = ray_tasks(FaultSampler, [{"sampler_id": i} for i in range(3)], max_processes=2, restart_on_failure=True)
    with tasks:
        tasks.step([0, 0, 0])
        tasks.pause_at(1)  # sampler 1, hosted by actor 0 with sampler 0
        old_pids = tasks.worker_pids
        os.kill(old_pids[0], signal.SIGKILL)
        with pytest.warns(WorkerRestartWarning, match="died"):
            results = tasks.step([0, 0])
        assert tasks.worker_pids[1] == old_pids[1] and tasks.worker_pids[0] not in (None, old_pids[0])
        restarted = results[0]  # sampler 0 was made again from its args
        assert restarted.observation == (0, 1, 0) and restarted.done and restarted.truncated
        error = restarted.info["worker_restarted"]
        assert isinstance(error, WorkerCrashedError) and error.restarted
        assert results[1].observation == (2, 1, 2) and not results[1].done
        assert tasks.attr("sampler_id") == [0, 2]  # sampler 1 is still paused in the new actor
        tasks.resume_all()
        assert tasks.get_observations() == [(0, 1, 0), (1, 1, 0), (2, 1, 2)]
        assert [r.observation for r in tasks.step([0, 0, 0])] == [(0, 1, 1), (1, 1, 1), (2, 1, 3)]


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"max_processes": 0}, "max_processes must be a positive int"),
        ({"read_timeout": 0}, "read_timeout must be a positive number"),
        ({"read_timeout": float("inf")}, "read_timeout must be a positive number .*, got inf"),
        ({"read_timeout": True}, "read_timeout must be a positive number .*, got True"),
        ({"num_cpus": float("nan")}, "num_cpus: expected a number >= 0 .*, got nan"),
        ({"num_cpus": -1}, "num_cpus: expected a number >= 0"),
        ({"num_gpus": 1}, r"num_gpus: .* need 2 GPU, but the Ray cluster has 0"),
        ({"num_cpus": 3}, r"num_cpus: .* need 6 CPU, but the Ray cluster has 4"),
        ({"max_restarts": -2}, "max_restarts must be an int >= -1"),
    ],
)
def test_bad_arguments_fail_before_any_actor_starts(options, match):
    before = live_actor_names()
    with pytest.raises(ValueError, match=match):
        RayVectorSampledTasks(CounterSampler, [{"sampler_id": i} for i in range(2)], **({"max_processes": 2} | options))
    assert live_actor_names() == before


def test_multiprocessing_arguments_are_ignored_out_loud():
    with pytest.warns(UserWarning, match="Ray starts the actors' processes"):
        tasks = ray_tasks(CounterSampler, [{"sampler_id": 0}], multiprocessing_start_method="fork")
    with tasks:
        assert tasks.step([3])[0].reward == 3.0


hostile_numbers = st.sampled_from(
    [-1, 0, True, None, "1", math.nan, math.inf, -math.inf, 2**70, 1e300, 1 + 2j, np.float64(math.nan), 10**6]
)


@settings(max_examples=60, deadline=None)
@given(
    cls=st.sampled_from(["tasks", "collector"]),
    num_cpus=st.one_of(hostile_numbers, st.just(1)),
    num_gpus=st.one_of(hostile_numbers, st.just(0)),
    timeout=st.one_of(hostile_numbers, st.just(30)),
)
def test_hostile_resources_and_timeouts_are_named_before_any_actor_starts(cls, num_cpus, num_gpus, timeout):
    """Issue 25's fuzz of the Ray classes' numeric arguments. Every drawn combination is
    refused (an accepted one would start actors; those are tested above): the error names
    the argument, the expected and the received value, and no actor is left."""
    from test_ray_collector import LinearActor

    from kernelgym.collectors.ray import RayCollector

    def number(value):
        return isinstance(value, (int, float)) and not isinstance(value, bool)

    accepted = (
        number(num_cpus)
        and 0 <= num_cpus <= 4  # the test cluster's CPUs
        and number(num_gpus)
        and num_gpus == 0
        and (timeout is None or number(timeout) and 0 < timeout <= threading.TIMEOUT_MAX)
    )
    if accepted:
        num_gpus = 10**6  # an accepted combination would start actors: make it one the cluster cannot place
    before = live_actor_names()
    with pytest.raises((TypeError, ValueError)) as caught:
        if cls == "tasks":
            specs = [{"sampler_id": i} for i in range(2)]
            RayVectorSampledTasks(
                CounterSampler, specs, max_processes=2, num_cpus=num_cpus, num_gpus=num_gpus, read_timeout=timeout
            )
        else:
            RayCollector(
                "CartPole-v1", LinearActor(), 4, num_envs=2, num_cpus=num_cpus, num_gpus=num_gpus, timeout=timeout
            )
    message = str(caught.value)
    assert any(name in message for name in ("num_cpus", "num_gpus", "timeout"))
    assert "got" in message or "but the Ray cluster has" in message  # the received value, or what it would need
    assert live_actor_names() == before
