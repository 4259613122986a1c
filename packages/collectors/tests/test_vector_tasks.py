"""VectorSampledTasks and SingleProcessVectorSampledTasks against a reference model."""

import pickle
import threading

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kernelgym.collectors import (
    GymTaskSampler,
    RLStepResult,
    SingleProcessVectorSampledTasks,
    Task,
    TaskSampler,
    VectorSampledTasks,
)
from kernelgym.collectors.vector_tasks import default_max_processes
from kernelgym.collectors.wire import PackedArray, pack_results, unpack_results

pytestmark = pytest.mark.usefixtures("no_leftover_processes")


class CounterTask(Task):
    """Observation ``(sampler_id, seed, task_number, steps)``; reward = action; ends after
    ``episode_length`` steps (terminated) or ``max_steps`` (truncated)."""

    def __init__(self, sampler_id, seed, number, episode_length, max_steps):
        super().__init__(task_info={"number": number}, max_steps=max_steps)
        self.sampler_id, self.seed, self.number, self.episode_length = sampler_id, seed, number, episode_length

    @property
    def action_space(self):
        return gym.spaces.Discrete(5)

    def get_observations(self):
        return (self.sampler_id, self.seed, self.number, self.num_steps_taken())

    def _step(self, action):
        steps = self.num_steps_taken() + 1
        observation = (self.sampler_id, self.seed, self.number, steps)
        return RLStepResult(observation, float(action), steps >= self.episode_length, {"action": action})

    def render(self, mode="rgb_array"):
        return np.full((2, 3, 3), self.sampler_id + 1, dtype=np.uint8)

    def scaled(self, factor):
        return self.sampler_id * factor


class CounterSampler(TaskSampler):
    def __init__(self, sampler_id, episode_length=3, max_steps=None, max_tasks=None):
        self.sampler_id, self.episode_length, self.max_steps, self.max_tasks = (
            sampler_id,
            episode_length,
            max_steps,
            max_tasks,
        )
        self.seed = 0
        self.count = 0
        self.closed = False
        self._last = None

    @property
    def length(self):
        return float("inf") if self.max_tasks is None else self.max_tasks - self.count

    @property
    def last_sampled_task(self):
        return self._last

    def next_task(self, **kwargs):
        if self.length <= 0:
            return None
        self.count += 1
        self._last = CounterTask(self.sampler_id, self.seed, self.count, self.episode_length, self.max_steps)
        return self._last

    def set_seed(self, seed):
        self.seed = seed

    def reset(self):
        self.count = 0

    def close(self):
        self.closed = True


class VectorModel:
    """The documented semantics, written independently of the implementation.

    A result is ``(observation, reward, done, terminated, truncated)``.
    """

    def __init__(self, specs, auto_resample):
        self.auto = auto_resample
        self.samplers = [dict(spec, sampler_seed=0, task_seed=0, count=0, steps=None, held=None) for spec in specs]
        for sampler in self.samplers:
            self._next(sampler)
        self.active = list(range(len(specs)))

    @staticmethod
    def _obs(s):
        return None if s["steps"] is None else (s["sampler_id"], s["task_seed"], s["count"], s["steps"])

    def _next(self, s):
        if s["max_tasks"] is not None and s["count"] >= s["max_tasks"]:
            s["steps"], s["held"] = None, (None, 0.0, True, False, True)
            return None
        s["count"] += 1
        s["steps"], s["held"], s["task_seed"] = 0, None, s["sampler_seed"]
        return self._obs(s)

    def step_one(self, s, action):
        if s["held"] is not None:
            return s["held"]
        s["steps"] += 1
        terminated = s["steps"] >= s["episode_length"]
        truncated = not terminated and s["max_steps"] is not None and s["steps"] >= s["max_steps"]
        observation = self._obs(s)
        if not (terminated or truncated):
            return (observation, float(action), False, False, False)
        if self.auto:
            return (self._next(s), float(action), True, terminated, truncated)
        s["held"] = (observation, 0.0, True, terminated, truncated)
        return (observation, float(action), True, terminated, truncated)

    def step(self, actions):
        results = [self.step_one(self.samplers[g], a) for g, a in zip(self.active, actions)]
        if not self.auto and results and all(r[2] for r in results):
            results = [(o, *r[1:]) for r, o in zip(results, self.next_task())]
        return results

    def next_task(self):
        return [self._next(self.samplers[g]) for g in self.active]

    def observations(self):
        return [self._obs(self.samplers[g]) for g in self.active]


def as_tuples(results):
    assert all(isinstance(r, RLStepResult) for r in results)
    return [(r.observation, r.reward, r.done, r.terminated, r.truncated) for r in results]


sampler_specs = st.lists(
    st.fixed_dictionaries(
        {
            "episode_length": st.integers(1, 4),
            "max_steps": st.none() | st.integers(1, 4),
            "max_tasks": st.none() | st.integers(1, 3),
        }
    ),
    min_size=1,
    max_size=5,
)


class VectorTasksMachine(RuleBasedStateMachine):
    """Random sequences of the public API, compared with ``VectorModel`` after each call."""

    multiprocess = False

    @initialize(specs=sampler_specs, auto=st.booleans(), max_processes=st.integers(1, 3))
    def start(self, specs, auto, max_processes):
        specs = [dict(spec, sampler_id=i) for i, spec in enumerate(specs)]
        self.model = VectorModel(specs, auto)
        if self.multiprocess:
            self.tasks = VectorSampledTasks(
                CounterSampler,
                specs,
                auto_resample_when_done=auto,
                multiprocessing_start_method="fork",
                max_processes=max_processes,
                read_timeout=20,
            )
        else:
            self.tasks = SingleProcessVectorSampledTasks(CounterSampler, specs, auto_resample_when_done=auto)

    def teardown(self):
        if hasattr(self, "tasks"):
            self.tasks.close()
            assert self.tasks.is_closed

    @rule(data=st.data())
    def step(self, data):
        actions = data.draw(
            st.lists(st.integers(0, 4), min_size=len(self.model.active), max_size=len(self.model.active))
        )
        results = self.tasks.step(actions)
        assert as_tuples(results) == self.model.step(actions)
        for result in results:
            if "final_observation" in (result.info or {}):
                assert result.done

    @precondition(lambda self: self.model.active)
    @rule(data=st.data(), action=st.integers(0, 4))
    def step_at(self, data, action):
        index = data.draw(st.integers(0, len(self.model.active) - 1))
        sampler = self.model.samplers[self.model.active[index]]
        assert as_tuples(self.tasks.step_at(index, action)) == [self.model.step_one(sampler, action)]

    @precondition(lambda self: self.model.active)
    @rule(data=st.data())
    def next_task_at(self, data):
        index = data.draw(st.integers(0, len(self.model.active) - 1))
        assert self.tasks.next_task_at(index) == [self.model._next(self.model.samplers[self.model.active[index]])]

    @rule()
    def next_task(self):
        assert self.tasks.next_task() == self.model.next_task()

    @precondition(lambda self: self.model.active)
    @rule(data=st.data())
    def pause_at(self, data):
        index = data.draw(st.integers(0, len(self.model.active) - 1))
        self.tasks.pause_at(index)
        del self.model.active[index]

    @rule()
    def resume_all(self):
        self.tasks.resume_all()
        self.model.active = list(range(len(self.model.samplers)))

    @rule(data=st.data())
    def set_seeds(self, data):
        seeds = data.draw(
            st.lists(st.integers(0, 99), min_size=len(self.model.active), max_size=len(self.model.active))
        )
        self.tasks.set_seeds(seeds)
        for g, seed in zip(self.model.active, seeds):
            self.model.samplers[g]["sampler_seed"] = seed

    @rule()
    def reset_all(self):
        self.tasks.reset_all()
        for g in self.model.active:
            self.model.samplers[g]["count"] = 0
            self.model._next(self.model.samplers[g])

    @invariant()
    def observations_match(self):
        if hasattr(self, "tasks"):
            assert self.tasks.num_unpaused_tasks == len(self.model.active)
            assert self.tasks.get_observations() == self.model.observations()


class MultiProcessVectorTasksMachine(VectorTasksMachine):
    multiprocess = True


TestSingleProcessAgainstModel = VectorTasksMachine.TestCase
TestSingleProcessAgainstModel.settings = settings(max_examples=60, stateful_step_count=30)
TestMultiProcessAgainstModel = MultiProcessVectorTasksMachine.TestCase
TestMultiProcessAgainstModel.settings = settings(max_examples=25, stateful_step_count=25)


# -- examples of the documented behaviour ------------------------------------------------------


def test_without_auto_resample_tasks_are_held_until_all_finish():
    specs = [{"sampler_id": 0, "episode_length": 1}, {"sampler_id": 1, "episode_length": 3}]
    with SingleProcessVectorSampledTasks(CounterSampler, specs, auto_resample_when_done=False) as tasks:
        first = tasks.step([2, 2])
        assert first[0].done and first[0].reward == 2.0 and first[0].info["task_metrics"]["ep_length"] == 1
        second = tasks.step([4, 4])
        assert second[0].reward == 0.0 and second[0].info == {"task_held": True}
        assert second[0].observation == (0, 0, 1, 1)  # the final observation, again
        assert not second[1].done
        third = tasks.step([1, 1])
        assert [r.done for r in third] == [True, True]
        assert [r.observation for r in third] == [(0, 0, 2, 0), (1, 0, 2, 0)]  # new tasks
        assert [r.info["final_observation"] for r in third] == [(0, 0, 1, 1), (1, 0, 1, 3)]
        assert [r.observation for r in tasks.step([1, 1])] == [(0, 0, 2, 1), (1, 0, 2, 1)]


@pytest.mark.parametrize("multiprocess", [False, True])
def test_remote_calls_attributes_and_commands(multiprocess):
    specs = [{"sampler_id": i} for i in range(3)]
    if multiprocess:
        tasks = VectorSampledTasks(CounterSampler, specs, multiprocessing_start_method="fork", max_processes=2)
        assert tasks.num_processes == 2 and len(set(tasks.worker_pids)) == 2
        assert tasks.mp_ctx.get_start_method() == "fork"
    else:
        tasks = SingleProcessVectorSampledTasks(CounterSampler, specs)
    with tasks:
        assert tasks.call("scaled", [[2], [3], [4]]) == [0, 3, 8]
        assert tasks.call(["scaled", "get_observations", "scaled"], [[1], None, [1]]) == [0, (1, 0, 1, 0), 2]
        assert tasks.attr("sampler_id") == [0, 1, 2]
        assert tasks.attr_at(2, "number") == 1
        assert tasks.call_at(1, "scaled", [10]) == 10
        assert tasks.command_at(1, "sampler_attr", "count") == 1
        assert tasks.command_at(1, "sampler_call", ("set_seed", [5])) is None
        assert tasks.command_at(1, "next_task") == (1, 5, 2, 0)
        tasks.pause_at(0)
        assert tasks.attr("sampler_id") == [1, 2]  # indices shifted down
        assert tasks.call_at(0, "scaled", [1]) == 1
        with pytest.raises(ValueError, match="command must be one of"):
            tasks.command_at(0, "explode")
        with pytest.raises(ValueError, match=r"sampler_index must be in \[0, 2\)"):
            tasks.attr_at(2, "number")
        with pytest.raises(TypeError, match="sampler_index must be an int"):
            tasks.attr_at("0", "number")
        with pytest.raises(ValueError, match="function_names must have one entry per unpaused task"):
            tasks.call(["scaled"], [[1]])
        tasks.resume_all()
        assert tasks.render("raw_rgb_list")[2][0, 0, 0] == 3
        tile = tasks.render("rgb_array")
        assert tile.shape == (4, 6, 3) and tile[0, 0, 0] == 1 and tile[0, 3, 0] == 2 and tile[2, 0, 0] == 3
        assert (tile[2:, 3:] == 0).all()
        with pytest.raises(ValueError, match="mode must be one of"):
            tasks.render("rgb")
    assert tasks.is_closed
    with pytest.raises(RuntimeError, match="is closed"):
        tasks.step([0, 0, 0])


def test_render_human_shows_the_tile_with_matplotlib():
    matplotlib = pytest.importorskip("matplotlib")  # the optional `render` extra
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with SingleProcessVectorSampledTasks(CounterSampler, [{"sampler_id": i} for i in range(2)]) as tasks:
        assert tasks.render() is None
    image = plt.gcf().axes[0].get_images()[0].get_array()
    assert image.shape == (2, 6, 3) and image[0, 3, 0] == 2
    plt.close("all")


def test_bad_call_arguments_change_nothing():
    specs = [{"sampler_id": i} for i in range(2)]
    with VectorSampledTasks(CounterSampler, specs, multiprocessing_start_method="fork", max_processes=2) as tasks:
        with pytest.raises(TypeError, match="arguments of 'call' must be picklable"):
            tasks.call("scaled", [[1], [threading.Lock()]])  # the second message fails to encode
        assert tasks.attr("sampler_id") == [0, 1]  # no reply was left unread
        with pytest.raises(ValueError, match=r"one action per unpaused task \(2\), got 3"):
            tasks.step([1, 1, 1])
        with pytest.raises(TypeError, match="actions must be a sequence"):
            tasks.async_step(5)
        assert tasks.get_observations() == [(0, 0, 1, 0), (1, 0, 1, 0)]
        tasks.async_step([1, 1])
        with pytest.raises(RuntimeError, match="call wait_step"):
            tasks.get_observations()
        assert [r.observation for r in tasks.wait_step()] == [(0, 0, 1, 1), (1, 0, 1, 1)]
        with pytest.raises(RuntimeError, match="needs an async_step"):
            tasks.wait_step()
        with pytest.raises(TypeError, match="seeds must be ints"):
            tasks.set_seeds([1, "2"])
        with pytest.raises(ValueError, match="seeds must have one entry per unpaused task"):
            tasks.set_seeds([1])


def test_default_layout_leaves_the_parent_a_cpu(monkeypatch):
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1, 2})
    assert default_max_processes() == 2
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0})
    assert default_max_processes() == 1


def test_close_with_an_unfinished_async_step_stops_the_workers():
    tasks = VectorSampledTasks(CounterSampler, [{"sampler_id": 0}], multiprocessing_start_method="fork")
    tasks.async_step([1])
    tasks.close()
    assert tasks.is_closed


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"make_sampler_fn": 3}, TypeError, "make_sampler_fn must be callable"),
        ({"sampler_fn_args": {"sampler_id": 0}}, TypeError, "sampler_fn_args must be a sequence of dicts"),
        ({"sampler_fn_args": []}, ValueError, "at least one sampler"),
        ({"sampler_fn_args": [{"sampler_id": 0}, 1]}, TypeError, r"sampler_fn_args\[1\] must be a dict"),
        ({"auto_resample_when_done": 1}, TypeError, "auto_resample_when_done must be a bool"),
        ({"multiprocessing_start_method": "thread"}, ValueError, "multiprocessing_start_method must be one of"),
        ({"max_processes": 0}, ValueError, "max_processes must be a positive int"),
        ({"read_timeout": -1}, ValueError, "read_timeout must be a positive number"),
        ({"sampler_fn_args": [{"sampler_id": threading.Lock()}]}, TypeError, "must be picklable by cloudpickle"),
    ],
)
def test_bad_constructor_arguments_fail_before_any_worker_starts(kwargs, error, match):
    arguments = {"make_sampler_fn": CounterSampler, "sampler_fn_args": [{"sampler_id": 0}]} | kwargs
    with pytest.raises(error, match=match):
        VectorSampledTasks(**arguments)


def _cartpole_observations(tasks, steps):
    observations = [np.array(tasks.get_observations())]
    for step in range(steps):
        results = tasks.step([(step + k) % 2 for k in range(tasks.num_unpaused_tasks)])
        observations.append(np.array([r.observation for r in results]))
    return np.stack(observations)


def test_seeded_runs_are_reproducible_across_process_layouts():
    args = [{"env": "CartPole-v1", "seed": 10 + i} for i in range(5)]
    with SingleProcessVectorSampledTasks(GymTaskSampler, args) as tasks:
        reference = _cartpole_observations(tasks, 60)
    for max_processes in (1, 2, 5):
        with VectorSampledTasks(
            GymTaskSampler, args, multiprocessing_start_method="fork", max_processes=max_processes
        ) as tasks:
            np.testing.assert_array_equal(_cartpole_observations(tasks, 60), reference)
            tasks.set_seeds([1, 2, 3, 4, 5])
            tasks.next_task()
            reseeded = _cartpole_observations(tasks, 20)
            tasks.set_seeds([1, 2, 3, 4, 5])
            tasks.next_task()
            np.testing.assert_array_equal(_cartpole_observations(tasks, 20), reseeded)


def test_forkserver_workers_run_lambdas_and_match_in_process_results():
    args = [{"seed": i} for i in range(2)]
    make = lambda seed: GymTaskSampler("CartPole-v1", seed=seed)  # noqa: E731 - cloudpickled to the worker
    with SingleProcessVectorSampledTasks(make, args) as tasks:
        reference = _cartpole_observations(tasks, 30)
    with VectorSampledTasks(make, args, multiprocessing_start_method="forkserver") as tasks:
        assert tasks.mp_ctx.get_start_method() == "forkserver"
        np.testing.assert_array_equal(_cartpole_observations(tasks, 30), reference)


# -- the packed wire format of the step hot path -----------------------------------------------


class EchoTask(Task):
    """Observes the last action it was given, as given."""

    action_space = None

    def get_observations(self):
        return np.zeros(2, dtype=np.float32)

    def _step(self, action):
        return RLStepResult(action, 0.0, False, {"type": type(action).__name__})


class EchoSampler(CounterSampler):
    def next_task(self, **kwargs):
        return EchoTask()


@pytest.mark.parametrize(
    "actions",
    [
        np.arange(6, dtype=np.float32).reshape(3, 2),
        np.array([1, 0, 1], dtype=np.int64),
        np.array([True, False, True]),
        [np.int8(3), "left", None],
    ],
    ids=["float-rows", "int64", "bool", "objects"],
)
def test_actions_reach_the_tasks_with_their_types_and_values(actions):
    specs = [{"sampler_id": i} for i in range(3)]
    with VectorSampledTasks(EchoSampler, specs, multiprocessing_start_method="fork", max_processes=2) as tasks:
        results = tasks.step(actions)
    for action, result in zip(actions, results):
        assert type(result.observation) is type(action) and result.info["type"] == type(action).__name__
        if isinstance(action, np.generic | np.ndarray):
            assert result.observation.dtype == action.dtype
            np.testing.assert_array_equal(result.observation, action)
            if isinstance(action, np.ndarray):
                result.observation[...] = 7  # observations come back writable
        else:
            assert result.observation == action


@settings(max_examples=40)
@given(
    shape=hnp.array_shapes(min_dims=0, max_dims=3, max_side=4),
    dtype=st.sampled_from(["bool", "int8", "uint16", "int64", "float32", "float64", "complex64"]),
    data=st.data(),
)
def test_packed_arrays_round_trip(shape, dtype, data):
    array = data.draw(hnp.arrays(dtype, shape))
    unpacked = PackedArray.pack(array).unpack()
    assert unpacked.dtype == array.dtype and unpacked.shape == array.shape and unpacked.flags.writeable
    np.testing.assert_array_equal(unpacked, array)


@settings(max_examples=40)
@given(
    observations=st.one_of(
        st.lists(hnp.arrays("float32", (2, 3), elements=st.floats(-9, 9, width=32)), min_size=1, max_size=4),
        st.lists(st.one_of(st.none(), st.integers(), hnp.arrays("int16", st.integers(0, 3))), min_size=1, max_size=4),
    ),
    done=st.booleans(),
)
def test_packed_results_round_trip(observations, done):
    results = [RLStepResult(obs, float(k), done, {"k": k}) for k, obs in enumerate(observations)]
    unpacked = unpack_results(pickle.loads(pickle.dumps(pack_results(results))))
    assert len(unpacked) == len(results)
    for original, copy in zip(results, unpacked):
        assert type(copy) is RLStepResult and copy[1:] == original[1:]
        if isinstance(original.observation, np.ndarray):
            np.testing.assert_array_equal(copy.observation, original.observation)
            assert copy.observation.dtype == original.observation.dtype
        else:
            assert copy.observation == original.observation
