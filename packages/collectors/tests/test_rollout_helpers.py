"""Nested-container helpers, numpy/torch aliasing, the Actor base class, worker errors."""

from __future__ import annotations

import multiprocessing
import pickle
import signal
from collections import namedtuple

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from kernelgym.collectors import WorkerCrashedError, WorkerError
from kernelgym.collectors.rollout import (
    Actor,
    CloudpickleSpawner,
    aliased,
    getitem,
    numpify,
    setitem,
    suply,
    torchify,
    tuply,
)
from kernelgym.collectors.rollout.nested import leaves
from kernelgym.collectors.rollout.workers import Workers

Pair = namedtuple("Pair", "left right")

structures = st.recursive(
    st.integers(-100, 100),
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.tuples(children, children),
        st.builds(Pair, children, children),
        st.dictionaries(st.sampled_from("abc"), children, max_size=3),
    ),
    max_leaves=12,
)


def plus_one(struct):
    """The reference: rebuild the container by hand."""
    if isinstance(struct, dict):
        return {k: plus_one(v) for k, v in struct.items()}
    if isinstance(struct, Pair):
        return Pair(plus_one(struct.left), plus_one(struct.right))
    if isinstance(struct, (list, tuple)):
        return type(struct)(plus_one(v) for v in struct)
    return struct + 1


@given(structures)
def test_suply_maps_leaves_and_keeps_the_structure(struct):
    mapped = suply(lambda x: x + 1, struct)
    assert mapped == plus_one(struct) and type(mapped) is type(struct)
    assert suply(lambda a, b: a - b, mapped, struct) == suply(lambda x: 1, struct)
    assert len(leaves(struct)) == len(leaves(mapped))


@given(structures, st.integers(0, 3))
def test_setitem_then_getitem_round_trips(struct, index):
    arrays = suply(lambda x: np.zeros(4, dtype=np.int64), struct)
    setitem(arrays, struct, index=index)
    assert suply(int, getitem(arrays, index=index)) == struct


def test_suply_rejects_mismatched_structures():
    with pytest.raises(ValueError):
        suply(lambda a, b: a, [1, 2], [1])


def test_tuply_passes_corresponding_leaves_together():
    a = {"x": torch.zeros(2), "y": (torch.ones(3),)}
    b = {"x": torch.ones(2), "y": (torch.zeros(3),)}
    stacked = tuply(torch.stack, a, b)
    assert stacked["x"].shape == (2, 2) and torch.equal(stacked["y"][0][0], torch.ones(3))


def test_torchify_aliases_numpy_unless_it_must_copy():
    array = np.arange(6, dtype=np.float32)
    alias = torchify({"a": array})["a"]
    alias[0] = 42.0
    assert array[0] == 42.0
    copied = torchify(array, copy=True)
    copied[1] = -1.0
    assert array[1] == 1.0
    grown = torchify(array, 3, 2)
    assert grown.shape == (3, 2, 6) and torch.equal(grown[2, 1], torch.from_numpy(array))
    assert torchify(array, shared=True).is_shared()
    unit = torchify(array, 1)
    unit[0, 2] = 7.0
    assert array[2] == 7.0  # unit leading dims broadcast: still an alias


def test_torchify_and_numpify_reject_bad_arguments():
    with pytest.raises(ValueError, match="mutually exclusive"):
        torchify(np.zeros(2), pinned=True, shared=True)
    with pytest.raises(TypeError, match="leading dims"):
        torchify(np.zeros(2), 2.5)
    with pytest.raises(TypeError, match="leading dims"):
        numpify(torch.zeros(2), -1)


def test_numpify_aliases_torch_or_allocates_shared_memory():
    tensor = torch.arange(4)
    view = numpify(tensor)
    view[0] = 9
    assert tensor[0] == 9
    shared = numpify(tensor, 2, ctx=multiprocessing.get_context("fork"))
    assert shared.shape == (2, 4) and np.array_equal(shared[1], tensor.numpy())
    shared[0, 0] = -5
    assert tensor[0] == 9


def test_aliased_views_share_one_storage():
    pair = aliased({"obs": np.zeros((2, 3), np.float32)}, shared=True)
    pair.npy["obs"][1, 2] = 3.0
    assert pair.pyt["obs"][1, 2] == 3.0 and pair.pyt["obs"].is_shared()


@pytest.mark.parametrize(
    "at, zeroed",
    [(1, [1]), (slice(0, 2), [0, 1]), (torch.tensor([0, 2]), [0, 2]), (torch.tensor([False, True, True]), [1, 2])],
)
def test_actor_reset_zeroes_the_chosen_envs_of_a_copy(at, zeroed):
    hx = (torch.ones(2, 3, 4), torch.full((1, 3), 5.0))
    reset = Actor().reset(hx, at)
    for before, after in zip(hx, reset):
        assert before.min() > 0  # the input is untouched
        for env in range(3):
            assert bool((after[:, env] == 0).all()) == (env in zeroed)


def test_actor_base_demands_step_and_initialized_hx():
    with pytest.raises(NotImplementedError, match="must implement Actor.step"):
        Actor().step(None, None, None, None, None)
    with pytest.raises(ValueError, match="hx is None"):
        Actor().reset(None, 0)


def test_cloudpickle_spawner_carries_closures():
    offset = 5
    spawner = pickle.loads(pickle.dumps(CloudpickleSpawner(lambda seed=None: seed + offset)))
    assert spawner(seed=1) == 6


class ExitedProcess:
    """Stands for a worker process that has exited with ``exitcode``."""

    def __init__(self, name, exitcode):
        self.name, self.exitcode = name, exitcode

    def is_alive(self):
        return False

    def join(self, timeout=None):
        pass


def error_of_exited_worker(exitcode, traceback_text=None):
    """The error ``Workers.check`` raises for a worker ``w-0`` that exited."""
    workers = Workers(multiprocessing.get_context("fork"), print, [], name="w")
    workers.processes = [ExitedProcess("w-0", exitcode)]
    if traceback_text is not None:
        workers.errors.put(("w-0", traceback_text))  # what a worker that raised reports
    try:
        with pytest.raises(WorkerError) as caught:
            workers.check()
    finally:
        workers.shutdown()
    return caught.value


def test_worker_error_says_how_the_worker_died():
    killed = error_of_exited_worker(-9)
    assert isinstance(killed, WorkerCrashedError) and "died of SIGKILL" in str(killed)
    assert killed.signal == signal.SIGKILL and killed.exitcode == -9 and killed.remote_traceback is None
    exited = error_of_exited_worker(3)
    assert isinstance(exited, WorkerCrashedError) and "exit code 3" in str(exited)
    assert exited.signal is None and exited.exitcode == 3
    raised = error_of_exited_worker(1, "Traceback ...\nKeyError: 'x'")
    assert type(raised) is WorkerError and "exit code 1" in str(raised)
    assert "KeyError" in str(raised) and "KeyError: 'x'" in raised.remote_traceback
    for error in (killed, exited, raised):
        assert error.worker == "w-0" and error.process_index == 0
        copy = pickle.loads(pickle.dumps(error))  # errors cross processes intact
        assert type(copy) is type(error) and copy.worker == "w-0" and str(copy) == str(error)
