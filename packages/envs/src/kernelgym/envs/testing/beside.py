"""Checks that run in a child process of their own, beside the checks the kit runs in order.

On cpu, once the first check has compiled the env's programs, the rest of a check's time is
two kinds of work the other checks do not need: the variants of the program that only one
check runs (``agent_order``'s phases in any agent order, ``autoreset``'s same-step program),
and ``long_horizon``, which steps thousands of envs for thousands of steps and replays a
sample through the Python reference. So `check_env` starts them in child processes once its
first check is done (`start_beside`; ``stateful``, which steps the same-step program, runs in
``autoreset``'s child after it); they work on the other core while the kit runs the rest,
and the kit collects their results (`PendingCheck.result`) once its own checks are done, so
that it never waits for a child while it has checks to run; the report keeps the checks'
order. Each child runs the same check on the same harness, examples and seed (every check is
pinned to the seed, with no example database), so it finds what the check finds in order (the
tests compare both).

Where this process can fork (`kernelgym.envs.testing.child_process.fork_refusal`: Linux, no
other thread, no CUDA context), each child is a fork: it starts in milliseconds with
everything imported and compiled, and any spec. Elsewhere only ``long_horizon`` runs
beside, in a started process that pays its imports (about 1.3 s on a 2-core machine) and
loads the programs from the compile cache, and only when the env can be sent to it (a spec
holding a lambda, neither importable nor registered through an entry point, cannot) and its
replays through the reference would take `MIN_BESIDE_SECONDS` or more (16 reference steps
timed); the other checks then run in order, as do all checks on the other backends (cuda steps
the horizon in a second; sim only takes a short look).
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import tempfile
import time

from kernelgym.envs.testing.child_process import (
    fork_child,
    fork_refusal,
    read_stderr,
    start_child,
    stop_child,
    transportable_env,
    write_json,
)
from kernelgym.envs.testing.report import ERROR, CheckResult

__all__ = [
    "BESIDE",
    "BESIDE_NOTE",
    "BesideChild",
    "FORKED_BESIDE",
    "FORKED_GROUPS",
    "MIN_BESIDE_SECONDS",
    "PendingCheck",
    "replay_seconds",
    "start_beside",
    "write_result",
]

# the checks that run in forked children on cpu, once the first check compiled the programs,
# one child per group, its checks in turn: the two that compile variants of their own (with
# `stateful`, which steps the same-step program `autoreset` compiles: one build, not a second
# in the kit's process while the child compiles it), and the long horizon
FORKED_GROUPS = (("agent_order",), ("autoreset", "stateful"), ("long_horizon",))
FORKED_BESIDE = tuple(name for group in FORKED_GROUPS for name in group)
# the one that runs in a started child where this process cannot fork
BESIDE = ("long_horizon",)
BESIDE_NOTE = "run in a process of its own, beside the other checks"
# a started child pays its imports and loads the programs (numba, hypothesis, the env's
# modules: about 2 s on a 2-core machine) and shares the cores: worth it for a horizon whose
# replays take longer. `replay_seconds` times the user's code only (the kit's comparisons add
# about half again): Ring-v0 (3 agents) about 5 s, beside; GoRight-v0 about 2 s, in order
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


class BesideChild:
    """A child process at work on one or more checks, each writing ``FOLDER/<check>.json``
    (`write_result`); its files are removed once every check's result is read, or on `cancel`."""

    def __init__(self, process, folder, names):
        self.process = process
        self._folder = folder
        self._unread = set(names)

    def result(self, name: str) -> CheckResult:
        """Wait for the child and read check ``name``'s result; an ``error`` result if the child
        died before writing it."""
        started = time.perf_counter()
        try:
            self.process.wait()
            path = os.path.join(self._folder.name, f"{name}.json")
            if not os.path.exists(path):
                stderr = read_stderr(self._folder.name)
                message = f"the check's child process failed (exit {self.process.returncode}):\n{stderr}"
                return CheckResult(name, ERROR, time.perf_counter() - started, message)
            with open(path) as file:
                found = json.load(file)
        finally:
            self._unread.discard(name)
            if not self._unread:
                self.cancel()
        found["note"] = f"{found['note']}; {BESIDE_NOTE}" if found["note"] else BESIDE_NOTE
        return CheckResult(**found)

    def cancel(self) -> None:
        """Stop the child if it still runs, and remove its files."""
        stop_child(self.process)
        if self._folder is not None:
            self._folder.cleanup()
            self._folder = None


class PendingCheck:
    """A check at work in a child process (`BesideChild`); `result` waits for its `CheckResult`."""

    def __init__(self, name: str, child: BesideChild):
        self.name = name
        self._child = child

    def result(self) -> CheckResult:
        """Wait for the child and read this check's result; an ``error`` result if the child died."""
        return self._child.result(self.name)

    def cancel(self) -> None:
        """Stop the child if it still runs (the other checks it runs too), and remove its files."""
        self._child.cancel()


def write_result(folder: str, result: CheckResult) -> None:
    """Write a child's `CheckResult` as ``FOLDER/<check>.json`` (`write_json`)."""
    write_json(os.path.join(folder, f"{result.name}.json"), dataclasses.asdict(result))


def start_beside(rest, harness, config, run_one) -> dict[str, PendingCheck]:
    """Start a child process for each check among ``rest`` (the checks still to run) that runs
    beside the others: each of `FORKED_BESIDE` where this process can fork, else `BESIDE` for an
    env the child can receive. Only on cpu; the others run in order.

    ``run_one(check, harness, config)`` runs a check and returns its `CheckResult`.
    """
    if harness.backend != "cpu" or harness.memory_unsafe:
        return {}
    if fork_refusal() is None:
        pending = {}
        for group in FORKED_GROUPS:
            checks = [check for check in rest if check.name in group]
            if checks:
                pending.update(_fork_checks(checks, harness, config, run_one))
        return pending
    names = [check.name for check in rest if check.name in BESIDE]
    if not names:
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
        started[name] = PendingCheck(name, BesideChild(process, folder, [name]))
    return started


def _fork_checks(checks, harness, config, run_one) -> dict[str, PendingCheck]:
    """One forked child running ``checks`` in turn, each result written as it is found."""
    names = [check.name for check in checks]
    folder = tempfile.TemporaryDirectory(prefix=f"kernelgym-{names[0]}-")

    def work() -> None:
        for check in checks:
            write_result(folder.name, run_one(check, harness, config))

    child = BesideChild(fork_child(work, folder.name), folder, names)
    return {name: PendingCheck(name, child) for name in names}
