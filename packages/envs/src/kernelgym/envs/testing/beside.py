"""Checks that run in a child process of their own, beside the checks the kit runs in order.

On cpu the ``long_horizon`` check is the kit's longest once the kernels are compiled: it
steps thousands of envs for thousands of steps and replays a sample of them through the
Python reference, a step at a time (16 of the 46 seconds of a cold check of a 3-agent env
on a 2-core machine). It needs nothing from the other checks but the compiled programs,
which the first check leaves in the compile cache. So `check_env` starts it in a child
process once its first check is done (`start_beside`): the child loads the programs from
the cache and runs the check on another core while the kit runs the rest, and the kit
collects its result at the check's turn (`PendingCheck.result`), in the report's order.

The child runs the same check on the same env, params, precision, tolerances, examples and
seed, so it finds what the check would find in the kit's process (the test compares both).
A spec the child cannot receive (one holding a lambda, neither importable nor registered
through an entry point) has the check run in the kit's own process, as do the other
backends (cuda steps the horizon in a second; sim only takes a short look) and a horizon
whose replays through the reference would take less than `MIN_BESIDE_SECONDS` (16
reference steps timed: a single-agent toy env, or fewer examples than the default), which
runs sooner in order than a child process starts.
"""

from __future__ import annotations

import json
import os
import pickle
import tempfile
import time

from kernelgym.envs.testing.child_process import read_stderr, start_child, stop_child, transportable_env
from kernelgym.envs.testing.report import ERROR, CheckResult

__all__ = ["BESIDE", "BESIDE_NOTE", "MIN_BESIDE_SECONDS", "PendingCheck", "replay_seconds", "start_beside"]

# the checks that run in a child process on cpu, once the first check compiled the programs
BESIDE = ("long_horizon",)
BESIDE_NOTE = "run in a process of its own, beside the other checks"
# a child pays its imports (numba, torch, the env's modules: about 4 s on a 2-core machine)
# and shares the cores: worth it for a horizon whose replays take longer. `replay_seconds`
# times the user's code only (the kit's comparisons about double it): Ring-v0 (3 agents)
# about 5 s, beside; GoRight-v0 about 2 s, in order
MIN_BESIDE_SECONDS = 4.0
TIMED_REFERENCE_STEPS = 16


def replay_seconds(harness, config) -> float:
    """About how long the long horizon's replays through the reference take: `TIMED_REFERENCE_STEPS`
    reference steps (step, observe, invariants) from a fresh env's states, timed, times the
    replays the horizon makes."""
    import numpy as np

    from kernelgym.envs.testing import strategies
    from kernelgym.envs.testing.harness import env_slice
    from kernelgym.envs.testing.long_horizon import horizon

    _envs, steps, replayed = horizon(harness.backend, config.max_examples)
    env = harness.make_env(TIMED_REFERENCE_STEPS + 1)  # the first check built its programs
    state, streams = env.get_state(), env.get_rng_states()
    actions = strategies.random_actions(
        harness.action_space, (TIMED_REFERENCE_STEPS + 1, *harness.agent_shape), np.random.default_rng(0)
    )

    def replay(index: int) -> None:  # what a replayed step runs of the user's code
        new_state, _reward, _terminated, _stream = harness.reference_step(
            env_slice(state, index), actions[index], streams[index]
        )
        harness.reference_observe(new_state)
        harness.invariant_problems(new_state)

    replay(0)  # untimed: the first call compiles the helpers the reference calls
    started = time.perf_counter()
    for index in range(1, TIMED_REFERENCE_STEPS + 1):
        replay(index)
    return (time.perf_counter() - started) / TIMED_REFERENCE_STEPS * steps * replayed


class PendingCheck:
    """A check at work in a child process; `result` waits for its `CheckResult`."""

    def __init__(self, name: str, process, folder):
        self.name = name
        self._process = process
        self._folder = folder

    def result(self) -> CheckResult:
        """Wait for the child and read its result; an ``error`` result if the child died."""
        started = time.perf_counter()
        try:
            self._process.wait()
            path = os.path.join(self._folder.name, "result.json")
            if not os.path.exists(path):
                stderr = read_stderr(self._folder.name)
                message = f"the check's child process failed (exit {self._process.returncode}):\n{stderr}"
                return CheckResult(self.name, ERROR, time.perf_counter() - started, message)
            with open(path) as file:
                found = json.load(file)
        finally:
            self.cancel()
        if found["note"]:
            found["note"] += f"; {BESIDE_NOTE}"
        return CheckResult(**found)

    def cancel(self) -> None:
        """Stop the child if it still runs, and remove its files."""
        stop_child(self._process)
        if self._folder is not None:
            self._folder.cleanup()
            self._folder = None


def start_beside(rest, harness, config) -> dict[str, PendingCheck]:
    """Start a child process for each check of `BESIDE` among ``rest`` (the checks still to run).

    Only on cpu, and only for an env the child can receive; the others run in order.
    """
    names = [check.name for check in rest if check.name in BESIDE]
    if harness.backend != "cpu" or not names or harness.memory_unsafe:
        return {}
    request = {
        "backend": harness.backend,
        "params": harness.overrides if harness.overrides is not None else harness.params,
        "rtol": harness.rtol,
        "atol": harness.atol,
        "precision": harness.precision,
        "max_examples": config.max_examples,
        "seed": config.seed,
    }
    try:
        request["env"] = harness.importable or transportable_env(harness.spec)
        pickle.dumps(request)
    except (TypeError, pickle.PicklingError, AttributeError):
        return {}  # the child could not receive it: the check runs in order
    # the reference steps timed last: only an env the child can receive needs the estimate
    try:
        seconds = replay_seconds(harness, config)
    except Exception:
        return {}  # a reference that raises: the check, in order, reports it
    if seconds < MIN_BESIDE_SECONDS:
        return {}  # a short horizon, or a quick reference: in order is sooner than a process start
    started = {}
    for name in names:
        folder = tempfile.TemporaryDirectory(prefix=f"kernelgym-{name}-")
        with open(os.path.join(folder.name, "request.pickle"), "wb") as file:
            pickle.dump({**request, "check": name}, file)
        process = start_child("kernelgym.envs.testing.beside_child", [folder.name], folder.name, dict(os.environ))
        started[name] = PendingCheck(name, process, folder)
    return started
