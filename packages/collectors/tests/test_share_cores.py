"""Worker processes divide the cores for numba's threads (issue 35): `share_cores`, and what a
worker started by `start_process` gets."""

import os
import sys
import types

import pytest

from kernelgym.collectors.processes import get_context, share_cores, start_process


class _FakeNumba(types.SimpleNamespace):
    def __init__(self, threads):
        super().__init__(config=types.SimpleNamespace(NUMBA_NUM_THREADS=threads), set_to=[])

    def set_num_threads(self, threads):
        self.set_to.append(threads)


@pytest.fixture
def eight_cpus(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))


@pytest.mark.parametrize("workers, expected", [(1, 8), (3, 2), (8, 1), (20, 1)])
def test_before_numba_is_imported_the_share_goes_to_numba_num_threads(monkeypatch, eight_cpus, workers, expected):
    monkeypatch.delitem(sys.modules, "numba", raising=False)
    monkeypatch.delenv("NUMBA_NUM_THREADS", raising=False)
    assert share_cores(workers) == expected
    assert os.environ["NUMBA_NUM_THREADS"] == str(expected)


def test_a_smaller_numba_num_threads_is_kept(monkeypatch, eight_cpus):
    monkeypatch.delitem(sys.modules, "numba", raising=False)
    monkeypatch.setenv("NUMBA_NUM_THREADS", "1")
    assert share_cores(2) == 1 and os.environ["NUMBA_NUM_THREADS"] == "1"


def test_once_numba_is_imported_the_share_is_set_for_the_calling_thread(monkeypatch, eight_cpus):
    fake = _FakeNumba(threads=8)
    monkeypatch.setitem(sys.modules, "numba", fake)
    assert share_cores(4) == 2 and fake.set_to == [2]
    capped = _FakeNumba(threads=3)  # numba's pool has 3 threads: no more than that
    monkeypatch.setitem(sys.modules, "numba", capped)
    assert share_cores(2) == 3 and capped.set_to == [3]


@pytest.mark.parametrize("workers", [0, -1, 1.5, True, "2"])
def test_a_bad_worker_count_is_refused_naming_it(workers):
    with pytest.raises(ValueError, match=rf"workers: expected an int >= 1, got {workers!r}"):
        share_cores(workers)


def _report_threads(queue):
    numba = sys.modules.get("numba")
    queue.put(numba.get_num_threads() if numba is not None else int(os.environ["NUMBA_NUM_THREADS"]))


def test_a_worker_started_as_one_of_as_many_as_the_cpus_gets_one_thread():
    mp = get_context("fork")
    queue = mp.Queue()
    cpus = len(os.sched_getaffinity(0))
    process = start_process(mp, _report_threads, (queue,), name="share", workers=cpus)
    try:
        assert queue.get(timeout=60) == 1
    finally:
        process.join(timeout=60)
    with pytest.raises(ValueError, match="workers: expected an int >= 1, got 0"):
        start_process(mp, _report_threads, (queue,), name="share", workers=0)
