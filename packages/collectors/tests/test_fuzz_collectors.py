"""Issue 25's fuzz test of the collectors: hostile construction and step arguments.

Every call must either raise ``TypeError``/``ValueError`` whose message names the argument
(or the actor's output) before anything ran, or give the result of a simple reference:
``VectorModel`` (the documented semantics of ``VectorSampledTasks``) and the in-process
rollout core for ``DeviceCollector``. pytest-timeout turns a hang into a failure. The Ray
classes' resource and timeout arguments are fuzzed in ``test_ray_vector_tasks.py`` (the
``ray`` tox env runs it).
"""

import math
import threading

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from test_device_collector import FormulaCounterEnv, TorchCounterVectorEnv
from test_rollout_envs import PolicyActor
from test_vector_tasks import CounterSampler, VectorModel, as_tuples, sampler_specs

from kernelgym.collectors import VectorSampledTasks, WorkerTimeoutError
from kernelgym.collectors.device_collector import DeviceCollector
from kernelgym.collectors.rollout import State, collect, prepare, startup

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("no_leftover_processes")]

hostile_numbers = st.one_of(
    st.sampled_from([0, -1, 2**63, 2**70, True, False, None, "1", 1.5, math.nan, math.inf, -math.inf, 1 + 2j]),
    st.integers(-3, 5),
)


def names(error, *arguments):
    return any(argument in str(error) for argument in arguments)


# -- VectorSampledTasks: construction ------------------------------------------------------------


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    max_processes=st.one_of(st.none(), hostile_numbers),
    read_timeout=st.one_of(st.none(), hostile_numbers, st.sampled_from([1e-9, 30.0, np.float64(30.0)])),
    start_method=st.sampled_from(["fork", "forkserver", "threads", "", None, 3]),
)
def test_hostile_construction_arguments_are_named_or_the_tasks_work(max_processes, read_timeout, start_method):
    specs = [{"sampler_id": 0}, {"sampler_id": 1}]
    try:
        tasks = VectorSampledTasks(
            CounterSampler,
            specs,
            multiprocessing_start_method=start_method,
            max_processes=max_processes,
            read_timeout=read_timeout,
        )
    except (TypeError, ValueError) as error:
        assert names(error, "max_processes", "read_timeout", "start_method"), error
        return
    except WorkerTimeoutError as error:
        # a timeout too short for a worker's start is reported as such: below a second always,
        # at a few seconds on a loaded machine (never at the 30 s or the default drawn here)
        assert read_timeout is not None and read_timeout < 30 and "did not answer within" in str(error)
        return
    with tasks:
        assert isinstance(max_processes, int) and max_processes >= 1 or max_processes is None
        assert read_timeout is None or 0 < read_timeout <= threading.TIMEOUT_MAX and not isinstance(read_timeout, bool)
        model = VectorModel([dict(spec, episode_length=3, max_steps=None, max_tasks=None) for spec in specs], True)
        assert as_tuples(tasks.step([1, 2])) == model.step([1, 2])


# -- VectorSampledTasks: steps -------------------------------------------------------------------


hostile_actions = st.one_of(
    st.sampled_from([None, 5, "ab", "abcde", {0: 1, 1: 2}, b"\x00\x01", (), []]),
    st.lists(st.one_of(st.integers(0, 4), st.sampled_from([2**70, -(2**70), math.inf, np.int64(3), 2.5])), max_size=6),
)


class HostileVectorTasks(RuleBasedStateMachine):
    """Hostile ``step``, ``step_at`` and ``set_seeds`` arguments against ``VectorModel``."""

    @initialize(specs=sampler_specs, max_processes=st.integers(1, 2))
    def start(self, specs, max_processes):
        specs = [dict(spec, sampler_id=i, max_tasks=None) for i, spec in enumerate(specs)]
        self.model = VectorModel(specs, True)
        self.tasks = VectorSampledTasks(
            CounterSampler, specs, multiprocessing_start_method="fork", max_processes=max_processes, read_timeout=20
        )

    def teardown(self):
        if hasattr(self, "tasks"):
            self.tasks.close()

    @rule(actions=hostile_actions, as_array=st.booleans())
    def step(self, actions, as_array):
        count = len(self.model.active)
        valid = isinstance(actions, list) and len(actions) == count
        if as_array and valid:
            actions = np.array(actions, dtype=object)
        try:
            results = self.tasks.step(actions)
        except (TypeError, ValueError) as error:
            assert not valid, f"refused {actions!r}: {error}"
            assert names(error, "actions"), error
            return
        assert valid, f"accepted {actions!r} for {count} tasks"
        assert as_tuples(results) == self.model.step(list(actions))

    @rule(index=hostile_numbers, action=st.integers(0, 4))
    def step_at(self, index, action):
        count = len(self.model.active)
        valid = isinstance(index, int) and not isinstance(index, bool) and 0 <= index < count
        try:
            results = self.tasks.step_at(index, action)
        except (TypeError, ValueError, IndexError) as error:
            assert not valid, f"refused index {index!r}: {error}"
            assert names(error, "index"), error
            return
        assert valid, f"accepted index {index!r} of {count} tasks"
        sampler = self.model.samplers[self.model.active[index]]
        assert as_tuples(results) == [self.model.step_one(sampler, action)]

    @rule(seeds=st.one_of(hostile_actions, hostile_numbers))
    def set_seeds(self, seeds):
        count = len(self.model.active)
        try:
            self.tasks.set_seeds(seeds)
        except (TypeError, ValueError) as error:
            assert names(error, "seeds"), error
            return
        assert isinstance(seeds, (list, tuple)) and len(seeds) == count or seeds is None or isinstance(seeds, str)
        seeds = [seeds] * count if seeds is None or isinstance(seeds, str) else list(seeds)
        for sampler, seed in zip(self.model.active, seeds):
            self.model.samplers[sampler]["sampler_seed"] = seed

    @invariant()
    def observations_match(self):
        if hasattr(self, "tasks"):
            assert self.tasks.get_observations() == self.model.observations()


HostileVectorTasks.TestCase.settings = settings(
    max_examples=40, stateful_step_count=12, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestHostileVectorTasks = HostileVectorTasks.TestCase


# -- DeviceCollector -----------------------------------------------------------------------------


class HostileActor(PolicyActor):
    """PolicyActor whose recurrent state, info and actions can be sized or typed wrongly."""

    def __init__(self, bias, hx_envs, info_envs, action):
        super().__init__(bias)
        self.hx_envs, self.info_envs, self.action = hx_envs, info_envs, action

    def step(self, stepno, obs, act, rew, fin, *, hx=None, virtual=False):
        action, _, info = super().step(stepno, obs, act, rew, fin, hx=hx, virtual=virtual)
        n_envs = obs.shape[1]
        hx = () if self.hx_envs is None else torch.zeros(1, self.hx_envs(n_envs), 2)
        value = info["value"]
        info = {"value": torch.cat([value, value], dim=1)[:, : self.info_envs(n_envs)]}
        if self.action == "float":
            action = action.float()
        elif self.action == "int32":
            action = action.int()
        elif self.action == "one env":
            action = action[:, :1]
        elif self.action == "extra dim":
            action = action.unsqueeze(-1)
        return action, hx, info


batch_sizes = st.sampled_from([("n", lambda n: n), ("1", lambda n: 1), ("n+1", lambda n: n + 1)])


@settings(max_examples=160, deadline=None)
@given(
    n_envs=st.integers(1, 3),
    n_steps=st.one_of(st.integers(1, 4), hostile_numbers, st.sampled_from([2**62, 2**70])),
    hx=st.one_of(st.none(), batch_sizes),
    info=batch_sizes,
    action=st.sampled_from(["ok", "int32", "float", "one env", "extra dim"]),
)
def test_hostile_device_collector_arguments_and_actor_outputs(n_envs, n_steps, hx, info, action):
    max_len, limit = 3, 4
    actor = HostileActor(1, None if hx is None else hx[1], info[1], action)
    good_batch = (hx is None or hx[1](n_envs) == n_envs) and info[1](n_envs) == n_envs
    good_action = action in ("ok", "int32") or action == "one env" and n_envs == 1
    valid_output = good_batch and good_action
    valid_steps = isinstance(n_steps, int) and not isinstance(n_steps, bool) and 1 <= n_steps < 2**62
    try:
        got = DeviceCollector(TorchCounterVectorEnv(n_envs, max_len, limit), actor, n_steps).collect()
    except (TypeError, ValueError) as error:
        assert not (valid_output and valid_steps), f"refused a valid run: {error}"
        if not valid_steps:
            assert names(error, "n_steps"), error
        else:
            assert names(error, "'hx'", "'info'", "'action'"), error
            if good_action:
                assert "expected shape" in str(error) and "got" in str(error)
        return
    assert valid_output and valid_steps, f"ran with hx={hx and hx[0]}, info={info[0]}, action={action}"
    reference = PolicyActor(1)
    envs = [FormulaCounterEnv(j, max_len, limit) for j in range(n_envs)]
    ctx, fragment = startup(envs, reference, prepare(FormulaCounterEnv(0, max_len, limit), reference, n_steps, n_envs))
    collect(envs, reference, fragment, ctx)
    for name in State._fields:
        expected = getattr(fragment.pyt.state, name)
        assert torch.equal(getattr(got.state, name), expected.to(getattr(got.state, name).dtype)), name
    assert torch.equal(got.actor["value"], fragment.pyt.actor["value"])
