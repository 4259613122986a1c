"""The cpu threading strategy: its override, the launch each strategy binds, and the adaptive
choice between the thread team and the serial twin (on a fake clock: nothing here is timed)."""

import functools
import sys

import numba
import numpy as np
import pytest

from core_test_kernels import affine
from kernelgym.core import bind, cpu_threads
from kernelgym.core.binding import PARALLEL_FROM


# ------------------------------------------------------------------ the strategy and its override
def test_the_strategy_is_adaptive_unless_the_environment_says_otherwise(monkeypatch):
    monkeypatch.delenv(cpu_threads.CPU_THREADS_ENV_VAR, raising=False)
    assert cpu_threads.cpu_threads_strategy() == "adaptive"
    monkeypatch.setenv(cpu_threads.CPU_THREADS_ENV_VAR, "")
    assert cpu_threads.cpu_threads_strategy() == "adaptive"
    for value, expected in (("one", "one"), (" ALL ", "all"), ("Adaptive", "adaptive")):
        monkeypatch.setenv(cpu_threads.CPU_THREADS_ENV_VAR, value)
        assert cpu_threads.cpu_threads_strategy() == expected
    assert cpu_threads.cpu_threads_strategy("one") == "one"  # an explicit value wins


def test_a_bad_strategy_is_refused_naming_the_variable_the_names_and_the_value(monkeypatch):
    monkeypatch.setenv(cpu_threads.CPU_THREADS_ENV_VAR, "2")
    with pytest.raises(
        ValueError, match=r"KERNELGYM_CPU_THREADS environment variable: expected one of .*'one'.*got '2'"
    ):
        cpu_threads.cpu_threads_strategy()
    with pytest.raises(TypeError, match=r"expected a str, one of .* got int 2"):
        cpu_threads.cpu_threads_strategy(2)


def test_the_override_wins_over_the_environment_inside_its_block_only(monkeypatch):
    monkeypatch.setenv(cpu_threads.CPU_THREADS_ENV_VAR, "all")
    with cpu_threads.cpu_threads_override("one"):
        assert cpu_threads.cpu_threads_strategy() == "one"
        assert cpu_threads.cpu_threads_strategy("adaptive") == "adaptive"  # an explicit value still wins
        assert not cpu_threads.team_allowed()
        with cpu_threads.cpu_threads_override(" Adaptive "):
            assert cpu_threads.cpu_threads_strategy() == "adaptive"
        assert cpu_threads.cpu_threads_strategy() == "one"
    assert cpu_threads.cpu_threads_strategy() == "all"
    with pytest.raises(ValueError, match=r"cpu threads strategy: expected one of .*got 'two'"):
        with cpu_threads.cpu_threads_override("two"):
            pass


def test_a_launch_bound_under_the_override_runs_the_serial_twin_only(monkeypatch):
    launch, x, out = _bound(monkeypatch, "all", PARALLEL_FROM, override="one")
    assert type(launch) is functools.partial and launch.func.py_func.__name__ == "cpu_serial_launcher"
    launch()
    assert np.array_equal(out, x * 2.0 + 1.0)


def _bound(monkeypatch, strategy, num_envs, override=None):
    monkeypatch.setenv(cpu_threads.CPU_THREADS_ENV_VAR, strategy)
    x = np.arange(2.0 * num_envs).reshape(num_envs, 2)
    out = np.zeros_like(x)
    values = {"x": x, "out": out, "scale": 2.0, "shift": 1.0}
    if override is None:
        launch = bind(affine, values, backend="cpu", num_envs=num_envs)
    else:
        with cpu_threads.cpu_threads_override(override):
            launch = bind(affine, values, backend="cpu", num_envs=num_envs)
    return launch.as_function(), x, out


@pytest.mark.parametrize(
    "strategy, launcher, kind",
    [("all", "cpu_launcher", functools.partial), ("one", "cpu_serial_launcher", functools.partial)],
)
def test_all_and_one_bind_the_team_or_the_serial_twin(monkeypatch, strategy, launcher, kind):
    launch, x, out = _bound(monkeypatch, strategy, PARALLEL_FROM)
    assert type(launch) is kind and launch.func.py_func.__name__ == launcher
    launch()
    assert np.array_equal(out, x * 2.0 + 1.0)


def test_adaptive_binds_both_builds_and_steps_alike(monkeypatch):
    launch, x, out = _bound(monkeypatch, "adaptive", PARALLEL_FROM)
    assert isinstance(launch, cpu_threads.AdaptiveLaunch) and launch.parallel
    assert launch.func.py_func.__name__ == "cpu_launcher"
    assert launch.serial.py_func.__name__ == "cpu_serial_launcher"
    launch()
    assert np.array_equal(out, x * 2.0 + 1.0)


def test_below_parallel_from_every_strategy_runs_serially(monkeypatch):
    for strategy in cpu_threads.STRATEGIES:
        launch, _, _ = _bound(monkeypatch, strategy, PARALLEL_FROM - 1)
        assert isinstance(launch, functools.partial) and launch.func.py_func.__name__ == "cpu_serial_launcher"


@pytest.mark.parametrize("strategy", ["one", "adaptive"])
def test_one_thread_per_launch_never_compiles_the_teams_build(monkeypatch, strategy):
    # a shift no other test binds: a program (and launcher module) of its own, not yet compiled
    monkeypatch.setenv(cpu_threads.CPU_THREADS_ENV_VAR, strategy)
    if strategy == "adaptive":
        monkeypatch.setattr(numba.config, "NUMBA_NUM_THREADS", 1)
    shift = {"one": 0.625, "adaptive": 0.375}[strategy]
    x = np.arange(2.0 * PARALLEL_FROM).reshape(PARALLEL_FROM, 2)
    out = np.zeros_like(x)
    values = {"x": x, "out": out, "scale": 2.0, "shift": shift}
    launch = bind(affine, values, backend="cpu", num_envs=PARALLEL_FROM).as_function()
    launch()
    module = sys.modules[launch.func.py_func.__module__]
    assert launch.func is module.cpu_serial_launcher and module.cpu_serial_launcher.signatures
    assert module.cpu_launcher.signatures == []
    assert np.array_equal(out, x * 2.0 + shift)


def test_one_numba_thread_binds_the_serial_twin(monkeypatch):
    monkeypatch.setattr(numba.config, "NUMBA_NUM_THREADS", 1)
    launch, _, _ = _bound(monkeypatch, "adaptive", PARALLEL_FROM)
    assert isinstance(launch, functools.partial) and launch.func.py_func.__name__ == "cpu_serial_launcher"


def test_describe_names_the_strategy_and_the_threads(monkeypatch):
    monkeypatch.setenv(cpu_threads.CPU_THREADS_ENV_VAR, "one")
    assert cpu_threads.describe().startswith("KERNELGYM_CPU_THREADS=one: 1 thread per launch; numba layer ")
    monkeypatch.setenv(cpu_threads.CPU_THREADS_ENV_VAR, "adaptive")
    assert f"the faster of 1 and {numba.get_num_threads()} threads" in cpu_threads.describe()


# ------------------------------------------------------------------ the adaptive choice, on a fake clock
class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class _Build:
    """A launcher that advances the fake clock by ``cost`` seconds per call."""

    def __init__(self, clock, cost, name):
        self.clock, self.cost, self.name = clock, cost, name
        self.signatures = ["sig"]
        self.calls = []

    def compile(self, signature):
        pass

    def __call__(self, *args):
        self.clock.now += self.cost
        self.calls.append(args)
        return self.name


def _adaptive(monkeypatch, team_cost, serial_cost):
    clock = _Clock()
    monkeypatch.setattr(cpu_threads.time, "perf_counter", clock)
    team, serial = _Build(clock, team_cost, "team"), _Build(clock, serial_cost, "serial")
    return clock, team, serial, cpu_threads.AdaptiveLaunch(team, serial, ("bound",))


def _run(launch, calls):
    return [launch("action") for _ in range(calls)]


def test_the_serial_twin_takes_over_when_the_team_is_slower(monkeypatch):
    _, team, serial, launch = _adaptive(monkeypatch, team_cost=0.004, serial_cost=0.001)
    ran = _run(launch, 40)
    assert team.calls[0] == ("bound", "action")  # bound values first, then the per-call ones
    assert ran[0] == "team" and ran[-1] == "serial" and not launch.parallel
    assert ran.count("team") <= cpu_threads.FIRST_GAP_S / 0.004 + 3  # the team ran until the first try


def test_the_team_stays_when_it_is_faster_and_tries_back_off(monkeypatch):
    clock, _, serial, launch = _adaptive(monkeypatch, team_cost=0.001, serial_cost=0.002)
    _run(launch, 3000)  # 3 s of launches
    assert launch.parallel
    # gaps of 0.05, 0.1, 0.2, ... s: about log2(3 / 0.05) tries of TRY_CALLS launches, not one every 0.05 s
    assert len(serial.calls) <= 7 * cpu_threads.TRY_CALLS
    assert clock.now == pytest.approx(3000 * 0.001 + len(serial.calls) * 0.001)


def test_a_collapsed_team_is_given_up_after_one_launch_and_tried_rarely(monkeypatch):
    # equal at first: the team stays
    _, team, _, launch = _adaptive(monkeypatch, team_cost=0.001, serial_cost=0.001)
    _run(launch, 200)
    team.cost = 0.05  # 50x slower: the others' processes took the cores
    _run(launch, 2000)
    assert not launch.parallel
    calls_before = len(team.calls)
    _run(launch, 2000)  # 2 s: tries that waste 0.049 s wait 4.9 s (TRY_SHARE)
    assert len(team.calls) - calls_before <= 1


def test_one_thread_for_the_caller_keeps_the_serial_twin(monkeypatch):
    _, team, serial, launch = _adaptive(monkeypatch, team_cost=0.004, serial_cost=0.001)
    _run(launch, 40)
    assert not launch.parallel
    team.cost = 0.0001  # the team would now win, but this thread has one numba thread
    monkeypatch.setattr(cpu_threads.numba, "get_num_threads", lambda: 1)
    calls_before = len(team.calls)
    _run(launch, 1000)
    assert len(team.calls) == calls_before and not launch.parallel


def test_adaptive_counts_count_each_build(monkeypatch):
    serial_before, team_before = cpu_threads.adaptive_counts()
    _, team, serial, launch = _adaptive(monkeypatch, team_cost=0.004, serial_cost=0.001)
    _run(launch, 40)
    assert cpu_threads.adaptive_counts() == (serial_before + len(serial.calls), team_before + len(team.calls))


def test_a_launch_bound_for_one_thread_runs_the_serial_twin_whatever_the_default(monkeypatch):
    from kernelgym.core import bind_launches

    monkeypatch.setenv(cpu_threads.CPU_THREADS_ENV_VAR, "all")
    x = np.arange(2.0 * PARALLEL_FROM).reshape(PARALLEL_FROM, 2)
    out = np.zeros_like(x)
    values = {"x": x, "out": out, "scale": 2.0, "shift": 0.875}  # a program of its own
    launch = bind_launches([affine], values, backend="cpu", num_envs=PARALLEL_FROM, cpu_threads="one").as_function()
    module = sys.modules[launch.func.py_func.__module__]
    assert isinstance(launch, functools.partial) and launch.func is module.cpu_serial_launcher
    assert module.cpu_launcher.signatures == []  # the team's build was never compiled
    launch()
    assert np.array_equal(out, x * 2.0 + 0.875)
    with pytest.raises(ValueError, match=r"cpu threads strategy: expected one of .*got 'two'"):
        bind_launches([affine], values, backend="cpu", num_envs=PARALLEL_FROM, cpu_threads="two")
