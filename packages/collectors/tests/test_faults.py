"""Fault injection: tasks that raise, workers that die or hang, a parent that dies."""

import ctypes
import faulthandler
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import threading
import time
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernelgym.collectors import (
    RLStepResult,
    SingleProcessVectorSampledTasks,
    Task,
    TaskSampler,
    VectorSampledTasks,
    WorkerCrashedError,
    WorkerError,
    WorkerRestartWarning,
    WorkerTimeoutError,
)

pytestmark = pytest.mark.usefixtures("no_leftover_processes")

# actions that make a FaultTask misbehave; any other action is a normal step
RAISE, UNPICKLABLE, SEGFAULT, HANG, EXIT, SLOW = "raise", "unpicklable", "segfault", "hang", "exit", "slow"
SPAWN_AND_HANG = "spawn_and_hang"  # with a path: start a `sleep` subprocess, write its pid there, hang
SPIN = "spin"  # a long loop that holds the GIL (as a numba loop does): no Python thread runs


class UnpicklableError(RuntimeError):
    def __init__(self):
        super().__init__("holds a lock")
        self.lock = threading.Lock()


def _refuse_to_unpickle():
    raise RuntimeError("this object cannot be unpickled")


class Poison:
    """Pickles fine, fails to unpickle."""

    def __reduce__(self):
        return (_refuse_to_unpickle, ())


class FaultTask(Task):
    """Observation ``(sampler_id, task_number, steps)``; never ends by itself."""

    def __init__(self, sampler_id, number):
        super().__init__()
        self.sampler_id, self.number = sampler_id, number
        self.poison, self.lock = Poison(), threading.Lock()

    @property
    def action_space(self):
        return None

    def get_observations(self):
        return (self.sampler_id, self.number, self.num_steps_taken())

    def _step(self, action):
        if action == RAISE:
            raise ValueError(f"boom in sampler {self.sampler_id}")
        if action == UNPICKLABLE:
            raise UnpicklableError()
        if action == SEGFAULT:
            faulthandler.disable()  # keep the test log free of the crash dump
            ctypes.string_at(0)
        if action == HANG:
            time.sleep(600)
        if action == EXIT:
            os._exit(3)
        if action == SLOW:
            time.sleep(0.5)
        if isinstance(action, tuple) and action[0] == SPAWN_AND_HANG:  # an env running a simulator process
            child = subprocess.Popen(["sleep", "600"])
            with open(action[1], "w") as file:
                file.write(str(child.pid))
            time.sleep(600)
        if action == SPIN:
            sum(range(10**14))  # one C call: the interpreter never switches threads inside it
        return RLStepResult((self.sampler_id, self.number, self.num_steps_taken() + 1), 0.0, False, {})


class FaultSampler(TaskSampler):
    def __init__(self, sampler_id, fail_on_create=False, fail_on_close=False):
        if fail_on_create:
            raise KeyError(f"no scene for sampler {sampler_id}")
        self.sampler_id, self.fail_on_close, self.count = sampler_id, fail_on_close, 0

    length = float("inf")
    last_sampled_task = None

    def next_task(self, **kwargs):
        self.count += 1
        return FaultTask(self.sampler_id, self.count)

    def set_seed(self, seed):
        pass

    def reset(self):
        self.count = 0

    def close(self):
        if self.fail_on_close:
            raise OSError(f"sampler {self.sampler_id} cannot close")


def make_tasks(multiprocess, count=3, **kwargs):
    specs = [{"sampler_id": i} for i in range(count)]
    if not multiprocess:
        return SingleProcessVectorSampledTasks(FaultSampler, specs)
    options = {"multiprocessing_start_method": "fork", "max_processes": 2, "read_timeout": 10} | kwargs
    return VectorSampledTasks(FaultSampler, specs, **options)


def pid_gone(pid):
    """Whether ``pid`` exited (a zombie waiting for its reaper counts as exited)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


# -- exceptions in user code -----------------------------------------------------------------


@pytest.mark.parametrize("multiprocess", [False, True])
def test_task_exception_reaches_the_parent_with_traceback_and_index(multiprocess):
    with make_tasks(multiprocess) as tasks:
        with pytest.raises(WorkerError) as caught:
            tasks.step([0, RAISE, 0])
        error = caught.value
        assert error.sampler_index == 1 and error.sampler_indices == (1,)
        assert error.process_index == (0 if multiprocess else None)  # samplers 0, 1 live in process 0
        assert "sampler 1 raised ValueError: boom in sampler 1" in str(error)
        assert "in _step" in error.remote_traceback and "boom in sampler 1" in error.remote_traceback
        assert isinstance(error.__cause__, ValueError)
        # every other sampler was served, and the vector goes on
        assert tasks.get_observations() == [(0, 1, 1), (1, 1, 0), (2, 1, 1)]
        assert [r.observation for r in tasks.step([0, 0, 0])] == [(0, 1, 2), (1, 1, 1), (2, 1, 2)]


@pytest.mark.parametrize("multiprocess", [False, True])
def test_failures_of_several_samplers_are_all_named(multiprocess):
    with make_tasks(multiprocess) as tasks:
        with pytest.raises(WorkerError) as caught:
            tasks.step([RAISE, 0, RAISE])
        assert caught.value.sampler_index == 0
        assert "boom in sampler 0" in caught.value.remote_traceback
        assert "more failure" in str(caught.value) and "2" in str(caught.value)


def test_an_unpicklable_exception_still_brings_its_traceback():
    with make_tasks(True) as tasks:
        with pytest.raises(WorkerError) as caught:
            tasks.step([0, 0, UNPICKLABLE])
        assert caught.value.sampler_index == 2 and caught.value.process_index == 1
        assert "UnpicklableError: holds a lock" in str(caught.value)
        assert caught.value.__cause__ is None


def test_replies_that_do_not_cross_processes_are_errors_not_desyncs():
    with make_tasks(True) as tasks:
        with pytest.raises(WorkerError, match="the worker's reply could not be pickled") as caught:
            tasks.attr("lock")
        assert caught.value.process_index == 0 and caught.value.sampler_index is None
        with pytest.raises(WorkerError, match="could not unpickle the reply") as caught:
            tasks.attr_at(2, "poison")
        assert "this object cannot be unpickled" in caught.value.remote_traceback
        assert tasks.attr("number") == [1, 1, 1]  # every reply still matches its request


CLOSED = []


class RecordingSampler(FaultSampler):
    def close(self):
        CLOSED.append(self.sampler_id)


def test_samplers_made_before_a_failing_one_are_closed():
    specs = [{"sampler_id": 0}, {"sampler_id": 1}, {"sampler_id": 2, "fail_on_create": True}]
    with pytest.raises(WorkerError, match="no scene for sampler 2"):
        SingleProcessVectorSampledTasks(RecordingSampler, specs)
    assert CLOSED == [0, 1]
    with pytest.raises(TypeError, match="must return a TaskSampler"):
        try:
            SingleProcessVectorSampledTasks(lambda: object(), [{}])
        except WorkerError as error:
            raise error.__cause__ from error


@contextmanager
def ctrl_c_after(seconds):
    """Raise KeyboardInterrupt in the main thread after ``seconds``, as Ctrl-C would."""

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(slow=st.lists(st.booleans(), min_size=3, max_size=3).filter(any), delay=st.floats(0.05, 0.3))
def test_an_interrupted_step_is_resumed_by_wait_step_never_skipped(slow, delay):
    # samplers 0 and 1 live in worker 0, sampler 2 in worker 1: a fast worker's reply may
    # already have been read when the interruption comes; it must not be lost
    with make_tasks(True) as tasks:
        with ctrl_c_after(delay), pytest.raises(KeyboardInterrupt):
            tasks.step([SLOW if s else 0 for s in slow])  # interrupted while waiting for the replies
        for call in (lambda: tasks.step([0, 0, 0]), tasks.get_observations, lambda: tasks.async_step([0, 0, 0])):
            with pytest.raises(RuntimeError, match=r"interrupted \(KeyboardInterrupt\).*call wait_step\(\)"):
                call()
        # the interrupted step's own results, one step on; then the next step, two steps on
        assert [r.observation for r in tasks.wait_step()] == [(0, 1, 1), (1, 1, 1), (2, 1, 1)]
        assert tasks.get_observations() == [(0, 1, 1), (1, 1, 1), (2, 1, 1)]
        assert [r.observation for r in tasks.step([0, 0, 0])] == [(0, 1, 2), (1, 1, 2), (2, 1, 2)]


@pytest.mark.parametrize("multiprocess", [False, True])
def test_any_other_interrupted_call_breaks_the_tasks_until_closed(multiprocess):
    tasks = make_tasks(multiprocess)
    interrupted = (lambda: tasks.step_at(0, SLOW)) if multiprocess else (lambda: tasks.step([0, SLOW, 0]))
    with ctrl_c_after(0.1), pytest.raises(KeyboardInterrupt):
        interrupted()
    for call in (
        tasks.get_observations,
        lambda: tasks.step([0, 0, 0]),
        lambda: tasks.attr("number"),
        tasks.wait_step if multiprocess else tasks.reset_all,
    ):
        with pytest.raises(
            RuntimeError, match=r"is broken: .*interrupted \(KeyboardInterrupt\).*close\(\) and make a new"
        ):
            call()
    assert not tasks.is_closed
    tasks.close()  # still stops every worker (the fixture checks that none is left)
    assert tasks.is_closed


@pytest.mark.parametrize("multiprocess", [False, True])
def test_a_sampler_that_cannot_be_made_fails_the_constructor(multiprocess):
    specs = [{"sampler_id": 0}, {"sampler_id": 1, "fail_on_create": True}]
    with pytest.raises(WorkerError) as caught:
        if multiprocess:
            VectorSampledTasks(FaultSampler, specs, multiprocessing_start_method="fork", max_processes=2)
        else:
            SingleProcessVectorSampledTasks(FaultSampler, specs)
    assert caught.value.sampler_index == 1
    assert "KeyError: 'no scene for sampler 1'" in str(caught.value)


def test_a_failing_sampler_close_is_reported():
    specs = [{"sampler_id": 0, "fail_on_close": True}]
    with pytest.raises(WorkerError, match="cannot close"):
        SingleProcessVectorSampledTasks(FaultSampler, specs).close()
    tasks = VectorSampledTasks(FaultSampler, specs, multiprocessing_start_method="fork")
    with pytest.warns(RuntimeWarning, match="sampler 0 cannot close"):
        tasks.close()


def test_worker_error_survives_pickling():
    error = WorkerCrashedError("gone", exitcode=-9, sampler_indices=(2, 3), process_index=1, remote_traceback="tb")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is WorkerCrashedError and str(copy) == str(error)
    assert (copy.signal, copy.sampler_indices, copy.process_index) == (signal.SIGKILL, (2, 3), 1)


# -- lost workers ------------------------------------------------------------------------------


def _shared_memory_entries():
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


@pytest.mark.parametrize("read_timeout", [10, None])
def test_a_killed_worker_is_reported_at_once_and_everything_stops(read_timeout):
    shared_memory_before = _shared_memory_entries()
    tasks = make_tasks(True, read_timeout=read_timeout)
    victim = tasks.worker_pids[1]
    os.kill(victim, signal.SIGKILL)
    started = time.monotonic()
    with pytest.raises(WorkerCrashedError) as caught:
        tasks.step([0, 0, 0])
    assert time.monotonic() - started < 3
    error = caught.value
    assert (error.exitcode, error.signal, error.process_index) == (-signal.SIGKILL, signal.SIGKILL, 1)
    assert error.sampler_index == 2 and error.sampler_indices == (2,)
    assert f"pid {victim}" in str(error) and "died of SIGKILL" in str(error)
    assert tasks.is_closed and all(pid_gone(pid) for pid in tasks.worker_pids)
    tasks.close()  # closing again is harmless
    assert _shared_memory_entries() <= shared_memory_before


@pytest.mark.parametrize(("action", "reason"), [(SEGFAULT, "died of SIGSEGV"), (EXIT, "died with exit code 3")])
def test_a_crashing_worker_reports_how_it_died(action, reason):
    tasks = make_tasks(True)
    started = time.monotonic()
    with pytest.raises(WorkerCrashedError, match=reason) as caught:
        tasks.step([action, 0, 0])
    assert time.monotonic() - started < 3
    assert caught.value.sampler_indices == (0, 1) and caught.value.sampler_index is None
    assert tasks.is_closed


def test_a_hung_worker_times_out_and_is_stopped():
    tasks = make_tasks(True, read_timeout=1.0)
    started = time.monotonic()
    with pytest.raises(WorkerTimeoutError, match="did not answer within 1.0 s") as caught:
        tasks.step([0, 0, HANG])
    assert 1.0 <= time.monotonic() - started < 3.5
    assert isinstance(caught.value, TimeoutError) and caught.value.sampler_index == 2
    assert tasks.is_closed and all(pid_gone(pid) for pid in tasks.worker_pids)


@pytest.mark.parametrize("restart_on_failure", [False, True])
def test_what_a_hung_worker_started_is_stopped_with_it(tmp_path, restart_on_failure):
    """Killed with its worker's process group: when the worker is restarted, or at close()."""
    tasks = make_tasks(True, read_timeout=1.0, restart_on_failure=restart_on_failure)
    pid_file = tmp_path / "simulator.pid"
    with (
        pytest.warns(WorkerRestartWarning, match="did not answer")
        if restart_on_failure
        else pytest.raises(WorkerTimeoutError)
    ):
        tasks.step([0, 0, (SPAWN_AND_HANG, str(pid_file))])
    if not restart_on_failure:
        tasks.close()
    simulator = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while not pid_gone(simulator) and time.monotonic() < deadline:
        time.sleep(0.05)  # the orphan is reaped by init once killed
    assert pid_gone(simulator), f"the worker's subprocess {simulator} outlived its worker"
    tasks.close()


def test_restart_on_failure_replaces_a_killed_worker():
    tasks = make_tasks(True, restart_on_failure=True)
    with tasks:
        tasks.step([0, 0, 0])
        old_pids = tasks.worker_pids
        os.kill(old_pids[0], signal.SIGKILL)
        with pytest.warns(WorkerRestartWarning, match="died of SIGKILL"):
            results = tasks.step([0, 0, 0])
        assert tasks.worker_pids[1] == old_pids[1] and tasks.worker_pids[0] != old_pids[0]
        restarted = results[:2]  # samplers 0 and 1 were made again from their args
        assert [r.observation for r in restarted] == [(0, 1, 0), (1, 1, 0)]
        assert all(r.done and r.truncated and not r.terminated and r.reward == 0.0 for r in restarted)
        error = restarted[0].info["worker_restarted"]
        assert isinstance(error, WorkerCrashedError) and error.restarted and error.exitcode == -signal.SIGKILL
        assert results[2].observation == (2, 1, 2) and not results[2].done
        assert [r.observation for r in tasks.step([0, 0, 0])] == [(0, 1, 1), (1, 1, 1), (2, 1, 3)]


def test_restart_on_failure_replaces_a_hung_worker_and_raises_for_other_calls():
    tasks = make_tasks(True, restart_on_failure=True, read_timeout=1.0)
    with tasks:
        tasks.pause_at(0)  # the restarted worker must keep sampler 0 paused
        with pytest.warns(WorkerRestartWarning, match="did not answer"):
            results = tasks.step([HANG, 0])
        assert results[0].observation == (1, 1, 0) and results[0].truncated
        assert tasks.num_unpaused_tasks == 2
        os.kill(tasks.worker_pids[1], signal.SIGKILL)
        with pytest.warns(WorkerRestartWarning), pytest.raises(WorkerCrashedError) as caught:
            tasks.attr_at(1, "number")
        assert caught.value.restarted and "(the worker was restarted)" in str(caught.value)
        assert tasks.attr("sampler_id") == [1, 2]
        tasks.resume_all()
        assert tasks.get_observations() == [(0, 1, 0), (1, 1, 0), (2, 1, 0)]


PARENT_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys, time
    sys.path.insert(0, {tests!r})
    from test_faults import FaultSampler, HANG
    from kernelgym.collectors import VectorSampledTasks

    tasks = VectorSampledTasks(FaultSampler, [{{"sampler_id": i}} for i in range(3)],
                               multiprocessing_start_method="fork", max_processes=3)
    tasks.async_step([HANG, 0, 0])  # worker 0 is stuck in user code when the parent dies
    print(*tasks.worker_pids, flush=True)
    time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def test_workers_exit_when_the_parent_dies_mid_use():
    script = PARENT_SCRIPT.format(tests=os.path.dirname(__file__))
    parent = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert parent.returncode == -signal.SIGKILL, parent.stderr
    worker_pids = [int(pid) for pid in parent.stdout.split()]
    assert len(worker_pids) == 3
    deadline = time.monotonic() + 5
    while not all(pid_gone(pid) for pid in worker_pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(pid_gone(pid) for pid in worker_pids), [pid for pid in worker_pids if not pid_gone(pid)]


def descendants(pid):
    """Process ids of every live descendant of ``pid`` (from /proc), with their command lines."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    command = cmdline.read().replace(b"\0", b" ").decode(errors="replace")
            except (FileNotFoundError, ProcessLookupError):
                continue
            if fields[0] not in ("Z", "X"):
                parents[int(entry)] = (int(fields[1]), command)
    found, frontier = {}, [pid]
    while frontier:
        parent = frontier.pop()
        for child, (ppid, command) in parents.items():
            if ppid == parent and child not in found:
                found[child] = command
                frontier.append(child)
    return found


def wait_gone(pids, seconds=3.0):
    """The pids still running after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not all(pid_gone(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [pid for pid in pids if not pid_gone(pid)]


SPINNING_PARENT = textwrap.dedent(
    """
    import os, signal, sys, time
    sys.path.insert(0, {tests!r})
    from test_faults import FaultSampler, SPIN, descendants
    from kernelgym.collectors import VectorSampledTasks

    tasks = VectorSampledTasks(FaultSampler, [{{"sampler_id": i}} for i in range(2)],
                               multiprocessing_start_method={method!r}, max_processes=2)
    tasks.async_step([SPIN, SPIN])  # both workers hold the GIL when the parent dies
    time.sleep(0.5)
    print(*tasks.worker_pids, flush=True)
    print(*descendants(os.getpid()), flush=True)  # with forkserver: the fork server too
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_workers_holding_the_gil_die_promptly_with_a_killed_parent(method, tmp_path):
    script = SPINNING_PARENT.format(tests=os.path.dirname(__file__), method=method)
    # a file, not a pipe: orphans holding a pipe would keep run() waiting for its end
    with open(tmp_path / "out", "w+") as out:
        parent = subprocess.run([sys.executable, "-c", script], stdout=out, stderr=subprocess.STDOUT, timeout=120)
        out.seek(0)
        lines = out.read().splitlines()
    assert parent.returncode == -signal.SIGKILL, lines
    workers, everything = [int(p) for p in lines[0].split()], [int(p) for p in lines[1].split()]
    assert len(workers) == 2 and set(workers) <= set(everything)
    left = wait_gone(everything)
    for pid in left:  # never leave spinning orphans behind, even when the test fails
        os.kill(pid, signal.SIGKILL)
    assert left == []


CLOSING_PARENT = textwrap.dedent(
    """
    import os, sys
    sys.path.insert(0, {tests!r})
    from test_faults import FaultSampler, descendants
    from kernelgym.collectors import VectorSampledTasks

    with VectorSampledTasks(FaultSampler, [{{"sampler_id": i}} for i in range(2)],
                            multiprocessing_start_method={method!r}, max_processes=2) as tasks:
        tasks.step([0, 0])
    for pid, command in descendants(os.getpid()).items():  # what remains after close()
        print(pid, command, flush=True)
    """
)


@pytest.mark.parametrize(
    ("method", "helpers"),
    [("fork", set()), ("spawn", {"resource_tracker"}), ("forkserver", {"forkserver", "resource_tracker"})],
)
def test_close_leaves_only_the_documented_helpers_which_exit_with_the_parent(method, helpers):
    script = CLOSING_PARENT.format(tests=os.path.dirname(__file__), method=method)
    parent = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert parent.returncode == 0, parent.stderr
    remaining = dict(line.split(" ", 1) for line in parent.stdout.splitlines())
    kinds = {
        kind
        for kind in ("forkserver", "resource_tracker")
        for command in remaining.values()
        if f"multiprocessing.{kind}" in command
    }
    assert kinds == helpers and len(remaining) == len(helpers), remaining  # no worker, nothing else
    assert wait_gone([int(pid) for pid in remaining]) == []  # they exit once the parent has
