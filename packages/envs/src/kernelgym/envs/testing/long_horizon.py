"""The kit's ``long_horizon`` check: thousands of envs for thousands of steps on the compiled kernel.

The hypothesis checks step small batches a few dozen steps, so a failure that needs many
steps (a NaN after 400 steps in one env of 200) or a branch taken with probability 1e-4 per
step passes them. This check steps `HORIZON` envs for as many steps, with the env's own time
limit and autoresets: half the envs take random actions and half edge actions (each action
element at its lowest or highest value). Every step it checks, for every env, that
observations, rewards and state are finite, and every `INVARIANTS_EVERY` steps the spec's
invariants; a sample of `HORIZON` envs is replayed through the reference at every step,
so that a rare branch is taken thousands of times over the sample. The replays, most of the
check's time, run block by block in forked children while the batch steps on
(`kernelgym.envs.testing.replays`).

At the first failure it replays the first failing env alone (a batch of one, from that
env's start state and stream) and reports that env's history: its last steps, what went
wrong, and the user's line: where a NaN arises (`locate_nonfinite`), or the line that last
wrote each array that differs from the reference (`locate_writes`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from gymnasium import spaces

from kernelgym.envs.testing import strategies
from kernelgym.envs.testing.child_process import fork_refusal
from kernelgym.envs.testing.harness import EnvHarness, _show, env_slice, fail_on, flat_obs
from kernelgym.envs.testing.nonfinite import (
    kernel_definition,
    locate_differences,
    locate_nonfinite,
    nonfinite_arrays,
)
from kernelgym.envs.testing.replays import (
    MAX_FORKED_BYTES,
    REPLAY_BLOCKS,
    Block,
    BlockReplays,
    block_steps,
    reference_problems,
)
from kernelgym.envs.testing.report import DEFAULT_MAX_EXAMPLES

__all__ = ["HORIZON", "INVARIANTS_EVERY", "check_long_horizon", "horizon"]

# (envs, steps, envs replayed through the reference) per backend: the simulator runs every
# thread as Python, so it only takes a short look
HORIZON = {"cpu": (2048, 2000, 32), "cuda": (4096, 4000, 32), "sim": (8, 64, 2)}
MIN_STEPS = 50  # the horizon with the fewest examples per check (see check_long_horizon)
MIN_ENVS = 256  # the envs stepped with the fewest examples per check
MIN_REPLAYED = 2  # the first and the last env: one with random actions, one with edge actions
INVARIANTS_EVERY = 100  # steps between checks of every env's invariants (a Python call per env)
HISTORY_SHOWN = 6  # steps of the failing env's history in the report


@dataclasses.dataclass
class _Failure:
    step: int  # 1-based
    env: int
    problems: list


def horizon(backend: str, max_examples: int) -> tuple[int, int, int]:
    """``(envs, steps, envs replayed through the reference)`` of the check at ``max_examples``."""
    num_envs, steps, replayed = HORIZON[backend]
    # fewer examples per check ask for a quicker look (a suite's few examples): fewer envs, fewer
    # steps and fewer envs replayed through the reference (a Python call per env and step), in
    # proportion; the default (or more) runs the whole horizon
    default = DEFAULT_MAX_EXAMPLES[backend]
    share = min(max_examples, default)
    num_envs = min(num_envs, max(MIN_ENVS, num_envs * share // default))
    steps = max(MIN_STEPS, steps * share // default)
    replayed = max(MIN_REPLAYED, replayed * share // default)
    return num_envs, steps, replayed


def check_long_horizon(harness: EnvHarness, config) -> str:
    """Thousands of envs x thousands of steps (random and edge actions): finite, invariants kept,
    a sample replayed through the reference; a failing env is replayed alone for its history."""
    num_envs, steps, replayed = horizon(harness.backend, config.max_examples)
    seed = 0 if config.seed is None else config.seed
    env = harness.make_env(num_envs, seed, fresh=True)
    try:
        start, start_rng = env.get_state(), env.get_rng_states()
        failure = _run(harness, env, seed, steps, _sample(num_envs, replayed, seed))
    finally:
        env.close()
    if failure is not None:
        fail_on(_alone(harness, seed, start, start_rng, failure), f"long horizon ({num_envs} envs x {steps} steps)")
    return f"{num_envs} envs x {steps} steps, {replayed} replayed through the reference"


def _sample(num_envs: int, replayed: int, seed: int) -> np.ndarray:
    """The envs replayed through the reference: the first (random actions), the last (edge
    actions) and others drawn at random."""
    inner = np.random.default_rng(seed).permutation(np.arange(1, num_envs - 1))[: max(0, replayed - 2)]
    return np.unique(np.concatenate([[0, num_envs - 1], inner])).astype(np.int64)


class _Actions:
    """Each step's actions: random for the first half of the envs, edge values for the second."""

    def __init__(self, harness: EnvHarness, num_envs: int, seed: int):
        self.space, self.shape = harness.action_space, (num_envs, *harness.agent_shape)
        self.generator = np.random.default_rng(seed)
        self.edges = num_envs // 2

    def next(self) -> np.ndarray:
        actions = strategies.random_actions(self.space, self.shape, self.generator)
        high = self.generator.integers(0, 2, size=actions[self.edges :].shape).astype(bool)
        actions[self.edges :] = np.where(high, self._high(actions.dtype), self._low(actions.dtype))
        return actions

    def _low(self, dtype):
        space = self.space
        if isinstance(space, spaces.Discrete):
            return np.asarray(space.start, dtype)
        if isinstance(space, spaces.MultiDiscrete):
            return np.asarray(space.start, dtype)
        if isinstance(space, spaces.MultiBinary):
            return np.zeros((), dtype)
        return np.asarray(strategies._box_bounds(space)[0], dtype)

    def _high(self, dtype):
        space = self.space
        if isinstance(space, spaces.Discrete):
            return np.asarray(space.start + space.n - 1, dtype)
        if isinstance(space, spaces.MultiDiscrete):
            return np.asarray(space.start + space.nvec - 1, dtype)
        if isinstance(space, spaces.MultiBinary):
            return np.ones((), dtype)
        return np.asarray(strategies._box_bounds(space)[1], dtype)


def _run(harness: EnvHarness, env, seed: int, steps: int, sample: np.ndarray) -> _Failure | None:
    """Step the batch; the first failing env (earliest step, then lowest index), or None.

    This process checks every env's values are finite and, every `INVARIANTS_EVERY` steps, its
    invariants; the sampled envs' replays through the reference run block by block beside it
    (`kernelgym.envs.testing.replays`)."""
    actions_source = _Actions(harness, env.num_envs, seed)
    space = harness.observation_space
    block = Block.start(sample, env.get_state(), env.get_rng_states())
    length = block_steps(steps)
    replays = BlockReplays(harness, forked=harness.backend == "cpu" and fork_refusal() is None)
    own = None  # (step, envs with non-finite values, envs breaking invariants) at this process's first finding
    try:
        for step in range(1, steps + 1):
            actions = actions_source.next()
            obs, rewards, terminated, truncated, _ = env.step(actions, numpy=True)
            obs = flat_obs(space, obs)
            state, rng_after = env.get_state(), env.get_rng_states()
            block.record(actions, obs, rewards, terminated, truncated, state, rng_after)
            if step == 1 and block.step_bytes() * steps > MAX_FORKED_BYTES:
                replays = BlockReplays(harness, forked=False)  # too much to keep: each block replayed here
                length = max(1, min(length, MAX_FORKED_BYTES // REPLAY_BLOCKS // block.step_bytes()))
            nonfinite = [int(index) for index in _nonfinite_envs(obs, rewards, state)]
            broken = {}
            if step % INVARIANTS_EVERY == 0 or step == steps:
                for index in range(env.num_envs):
                    found = harness.invariant_problems(env_slice(state, index))
                    if found:
                        broken[index] = found
            if nonfinite or broken:
                own = (step, nonfinite, broken)
                break
            if len(block.steps) == length and step < steps:
                replays.submit(block)
                block = block.following()
                if replays.failed():
                    break  # a sampled env failed in a block already replayed: no later step is reported
        replays.submit(block, here=True)
        replayed = replays.first_failure()
    finally:
        replays.close()
    return _first_failure(own, replayed)


def _first_failure(own, replayed) -> _Failure | None:
    """The earliest of this process's finding and the replays', its lowest env; at the same step
    an env's problems in the order of one pass: non-finite values, the replay, the invariants."""
    steps = [found[0] for found in (own, replayed) if found is not None]
    if not steps:
        return None
    step = min(steps)
    failing: dict[int, list[str]] = {}
    if own is not None and own[0] == step:
        for index in own[1]:
            failing.setdefault(index, []).append("NaN or inf in its observation, reward or state")
    if replayed is not None and replayed[0] == step:
        for index, problems in replayed[1].items():
            failing.setdefault(index, []).extend(problems)
    if own is not None and own[0] == step:
        for index, problems in own[2].items():
            failing.setdefault(index, []).extend(problems)
    first = min(failing)
    return _Failure(step, first, failing[first])


def _nonfinite_envs(obs, rewards, state) -> np.ndarray:
    bad = ~np.isfinite(obs.reshape(obs.shape[0], -1)).all(axis=1) | ~np.isfinite(rewards.reshape(obs.shape[0], -1)).all(
        axis=1
    )
    for value in state.values():
        if value.dtype.kind == "f":
            bad |= ~np.isfinite(value.reshape(value.shape[0], -1)).all(axis=1)
    return np.flatnonzero(bad)


def _alone(harness: EnvHarness, seed: int, start: dict, start_rng, failure: _Failure) -> list[str]:
    """Replay env ``failure.env`` alone to its failing step; its history and the user's line."""
    index = failure.env
    num_envs = start_rng.shape[0]
    actions_source = _Actions(harness, num_envs, seed)
    env = harness.make_env(1, seed, fresh=True)
    try:
        env.set_state({name: value[index : index + 1] for name, value in start.items()}, check_invariants=False)
        env.set_rng_states(start_rng[index : index + 1])
        history = []
        prev, streams = env.get_state(), env.get_rng_states()
        pending = np.zeros(1, bool)
        for step in range(1, failure.step + 1):
            actions = actions_source.next()[index : index + 1]
            obs, rewards, terminated, truncated, _ = env.step(actions, numpy=True)
            obs = flat_obs(harness.observation_space, obs)
            state, rng_after = env.get_state(), env.get_rng_states()
            history.append(
                f"  step {step}: action {_show(actions[0])} -> reward {_show(rewards[0])}, "
                f"terminated {bool(terminated[0])}, truncated {bool(truncated[0])}, "
                f"state {_state_line(env_slice(state, 0))}"
            )
            found = reference_problems(
                harness, prev, streams, actions, obs, rewards, terminated, state, rng_after, pending, 0
            )
            found += (
                ["NaN or inf in its observation, reward or state"] if len(_nonfinite_envs(obs, rewards, state)) else []
            )
            found += [] if found else harness.invariant_problems(env_slice(state, 0))
            if found:
                kernel_field = "reset_kernel" if pending[0] else "step_kernel"
                where = _where(harness, kernel_field, prev, actions, streams, found, obs, rewards, state)
                return [
                    f"env {index} of {num_envs} (seed {seed}) fails at step {step}, replayed alone: "
                    + "; ".join(found),
                    *where,
                    f"  its last {min(HISTORY_SHOWN, len(history))} steps (replayed alone):",
                    *history[-HISTORY_SHOWN:],
                ]
            prev, streams, pending = state, rng_after, terminated | truncated
    finally:
        env.close()
    return [
        f"env {index} of {num_envs} (seed {seed}) failed at step {failure.step}: " + "; ".join(failure.problems),
        f"  but not when replayed alone: the env depends on the others in its batch (cross-talk, "
        f"or a race); kernels {_kernels(harness)}",
    ]


def _where(harness, kernel_field, prev, actions, streams, found, obs, rewards, state) -> list[str]:
    """The user's line: where a NaN arises, or which line wrote each array that differs."""
    outputs = {"obs": obs[0], "rewards": rewards[0], **env_slice(state, 0)}
    if nonfinite_arrays(outputs):
        return ["  " + locate_nonfinite(harness, kernel_field, prev, actions, streams, 0)]
    return ["  " + line for line in locate_differences(harness, kernel_field, prev, actions, streams, 0, found)]


def _kernels(harness, kernel_field: str = "step_kernel") -> str:
    return " or ".join(kernel_definition(kernel) for kernel in harness.spec.load_kernels(kernel_field))


def _state_line(state: dict) -> str:
    return "{" + ", ".join(f"{name}: {_show(value)}" for name, value in state.items()) + "}"
