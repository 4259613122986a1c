"""The kit's agent_order check: agent kernels that race on a GPU fail it on the cpu, naming kernel and array.

The races are planted in kit_fixtures/agent_walk.py: each bug copy has an exact reference
that runs the agents in index order, as the cpu twin does, so the in-order checks
(parity here) pass them; only running the agents in other orders shows them.
"""

import inspect
import re

import numpy as np
import pytest

from kernelgym.envs.testing import check_env
from kernelgym.envs.testing.harness import EnvHarness
from kernelgym.envs.testing.order_check import order_problems
from kernelgym.envs.testing.strategies import Batch
from kit_fixtures import agent_walk

SEED = 20261122  # fixed: the test is reproducible; any seed finds these races


def _site(kernel, text: str) -> str:
    """``<file>:<line>`` of the line of ``kernel`` holding ``text``."""
    lines, first = inspect.getsourcelines(kernel.py_func)
    return f"{inspect.getsourcefile(kernel.py_func)}:{first + next(k for k, line in enumerate(lines) if text in line)}"


def _run(spec, examples=10):
    return check_env(spec, backend="cpu", max_examples=examples, seed=SEED, checks=["parity", "agent_order"])


@pytest.mark.parametrize("spec", [agent_walk.SPEC, agent_walk.VIA_HELPER], ids=lambda spec: spec.id)
def test_the_correct_agent_walk_passes(spec):
    report = _run(spec, examples=20)
    assert report.passed, "\n".join(f"{r.name}: {r.message}\n{r.example}" for r in report.failures)


def test_agents_drawing_from_one_shared_stream_fail_naming_the_kernel_and_the_array():
    report = _run(agent_walk.SHARED_STREAM)
    assert report["parity"].status == "passed", report["parity"].message  # in order, it matches its reference
    order = report["agent_order"]
    assert order.status == "failed"
    # another order gives an agent other draws (its position), or, alone, each draws the stream's first
    # value: the stream is written by several agents
    assert re.search(
        r"move_shared_stream \(step_kernel phase 1 of 2\): "
        r"('position' differs from the in-order run, first in env \d+, when the envs ran in reverse"
        r"|'rng_states' differs from the in-order run when the agents of env \d+ all read before "
        r"any of them writes .*: agents \[\d+, \d+.*\] draw from one RNG stream)",
        order.message,
    ), order.message
    assert "finish" not in order.message  # the later phase ran from the in-order result: not blamed


def test_agents_writing_a_shared_per_env_value_fail_naming_the_kernel_and_the_array():
    report = _run(agent_walk.SHARED_WRITE)
    assert report["parity"].status == "passed", report["parity"].message
    order = report["agent_order"]
    assert order.status == "failed"
    assert (
        "finish_shared_write (step_kernel phase 2 of 2): 'terminated' differs from the in-order run" in order.message
    ), order.message
    assert "move " not in order.message
    site = _site(agent_walk.finish_shared_write, "terminated[env] = position[env, agent] >= goal")
    assert f"written at finish_shared_write at {site}" in order.message, order.message


def test_a_shared_counter_updated_without_atomic_add_fails_naming_the_kernel_and_the_array():
    report = _run(agent_walk.LOST_UPDATE, examples=20)
    assert report["parity"].status == "passed", report["parity"].message
    order = report["agent_order"]
    assert order.status == "failed"
    # the same count in every order on the cpu: only the agents-read-first interleaving shows it
    assert (
        "move_lost_update (step_kernel phase 1 of 2): 'arrived' differs from the in-order run when the agents of env"
    ) in order.message, order.message
    assert "(not through atomic_add)" in order.message and "a lost update" in order.message, order.message
    site = _site(agent_walk.move_lost_update, "arrived[env] += 1")
    assert f"written at move_lost_update at {site}: `arrived[env] += 1`" in order.message, order.message


def test_atomic_add_through_a_device_function_is_told_apart_from_a_plain_write():
    # atomic_add reached through helpers: the copy of the kernel replaces it in them too
    from kernelgym.envs.testing.order_check import _adds_nothing, _without_atomics

    copy = _without_atomics(agent_walk.move_via_helper)
    helper = copy.py_func.__globals__["count_arrival"]
    assert helper.py_func.__globals__["atomic_add"] is _adds_nothing
    assert agent_walk.count_arrival.py_func.__globals__["atomic_add"] is not _adds_nothing  # the original stays
    assert _without_atomics(agent_walk.finish) is None  # no atomic_add: the kernel itself runs alone


def test_a_shared_stream_is_found_from_any_state_with_two_agents_left_to_draw():
    # deterministic: two agents that still walk draw from one stream; reversed, they swap draws
    harness = EnvHarness(agent_walk.SHARED_STREAM, "cpu")
    state = {"position": np.array([0, 0, 0], np.int32), "arrived": np.int32(0).reshape(())}
    batch = Batch((state, state), np.zeros((2, 3), np.int64), (False, False))
    found = [seed for seed in range(8) if order_problems(harness, batch, seed, 0)]
    assert found, "no seed made two agents' draws differ"
    correct = EnvHarness(agent_walk.SPEC, "cpu")
    assert all(not order_problems(correct, batch, seed, 0) for seed in range(8))


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1", "MountainCar-v0", "Acrobot-v1"])
def test_env_layout_envs_pass_with_a_note(env_id):
    result = check_env(env_id, backend="cpu", max_examples=2, seed=SEED, checks=["agent_order"])["agent_order"]
    assert result.status == "passed" and "env-layout kernels" in result.note, result


@pytest.mark.parametrize("env_id", ["TagGridWorld-v0", "TagContinuous-v0"])
def test_the_tag_envs_pass(env_id):
    result = check_env(env_id, backend="cpu", max_examples=5, seed=SEED, checks=["agent_order"])["agent_order"]
    assert result.status == "passed", f"{result.message}\n{result.example}"
    assert result.note == ""  # it ran: no note of a layout without agents
