"""The long horizon's replays through the reference, block by block, each block in a process of its own.

Replaying the sampled envs through the Python reference is most of the ``long_horizon``
check's time (Ring-v0: about 8 of its 10 CPU-seconds), and a replayed step needs only what the
batch gave: the sampled envs' state, streams and pending resets before it, their actions and
outputs, and their state and streams after. So the check records the sampled envs' steps in
blocks (`Block`); `BlockReplays` replays each full block in a forked child while the batch steps on
(on cpu, where this process may fork: `kernelgym.envs.testing.child_process.fork_refusal`),
and the last block in this process. Elsewhere (cuda, sim, or no fork) each block is replayed
here as soon as it is full, and the batch stops stepping at the first block that fails.
Either way the replays find what one pass over the steps finds (tested): the first step at
which a sampled env differs from the reference, with each such env's problems.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile

import numpy as np

from kernelgym.envs.testing.child_process import fork_child, stop_child, write_json
from kernelgym.envs.testing.harness import env_slice

__all__ = ["MAX_FORKED_BYTES", "REPLAY_BLOCKS", "Block", "BlockReplays", "block_steps", "reference_problems", "replay"]

# blocks per horizon: with the last one replayed here, up to three children work beside the batch
REPLAY_BLOCKS = 4
# a forked block's data stays here until its child's result is read (a child that died is
# replayed here again, so that an exception in the reference is raised as in one process);
# past this many bytes of recorded steps the blocks are replayed here, one at a time
MAX_FORKED_BYTES = 256 * 2**20


@dataclasses.dataclass
class Block:
    """Recorded steps of the sampled envs, from step ``first_step`` (1-based) on.

    ``prev``, ``streams`` and ``pending`` are the sampled envs' state, RNG stream rows and
    pending resets before the block's first step; each of ``steps`` holds one step's
    ``(actions, obs, rewards, terminated, truncated, state, streams after)`` of those envs.
    """

    first_step: int
    sample: np.ndarray
    prev: dict
    streams: np.ndarray
    pending: np.ndarray
    steps: list = dataclasses.field(default_factory=list)

    @classmethod
    def start(cls, sample: np.ndarray, state: dict, streams: np.ndarray) -> Block:
        """The first block: the sampled envs of a batch in ``state`` with ``streams``, no reset pending."""
        return cls(1, sample, _pick(state, sample), streams[sample], np.zeros(len(sample), bool))

    def record(self, actions, obs, rewards, terminated, truncated, state: dict, rng_after) -> None:
        """Keep the sampled envs' part of one step of the batch (copies)."""
        picked = self.sample
        self.steps.append(
            (
                actions[picked],
                obs[picked],
                rewards[picked],
                terminated[picked],
                truncated[picked],
                _pick(state, picked),
                rng_after[picked],
            )
        )

    def step_bytes(self) -> int:
        """The bytes one recorded step holds."""
        actions, obs, rewards, terminated, truncated, state, rng_after = self.steps[0]
        arrays = (actions, obs, rewards, terminated, truncated, rng_after, *state.values())
        return sum(np.asarray(array).nbytes for array in arrays)

    def following(self) -> Block:
        """An empty block that starts after this one's last step."""
        _actions, _obs, _rewards, terminated, truncated, state, rng_after = self.steps[-1]
        return Block(self.first_step + len(self.steps), self.sample, state, rng_after, terminated | truncated)


def block_steps(steps: int) -> int:
    """Steps per block of a horizon of ``steps`` steps (`REPLAY_BLOCKS` blocks)."""
    return max(1, -(-steps // REPLAY_BLOCKS))


def replay(harness, block: Block) -> tuple[int, dict[int, list[str]]] | None:
    """Replay ``block`` through the reference: the first step at which a sampled env differs
    (or breaks an invariant), with each such env's problems by env index; None if none does."""
    prev, streams, pending = block.prev, block.streams, block.pending
    for offset, (actions, obs, rewards, terminated, truncated, state, rng_after) in enumerate(block.steps):
        failing = {}
        for position, index in enumerate(block.sample):
            found = reference_problems(
                harness, prev, streams, actions, obs, rewards, terminated, state, rng_after, pending, position
            )
            if found:
                failing[int(index)] = found
        if failing:
            return block.first_step + offset, failing
        prev, streams, pending = state, rng_after, terminated | truncated
    return None


class BlockReplays:
    """The replays of a horizon's blocks: `submit` each in turn, then `first_failure`.

    Parameters
    ----------
    harness : EnvHarness
    forked : bool
        Replay the submitted blocks in forked children (the caller checked `fork_refusal`);
        False: each is replayed here when submitted.
    """

    def __init__(self, harness, forked: bool):
        self._harness = harness
        self._forked = forked
        self._started: list[tuple] = []  # (block, child, folder) per forked block, in step order
        self._found: tuple[int, dict[int, list[str]]] | None = None  # the first failure of a block replayed here
        self._raised: Exception | None = None  # the reference's error in the last block, raised after forked ones

    def submit(self, block: Block, here: bool = False) -> None:
        """Replay ``block``: in a forked child, or here if ``here`` or not ``forked``."""
        if not block.steps or self._found is not None:
            return  # nothing to replay, or a block before it failed (its failure comes first)
        if here or not self._forked:
            try:
                self._found = replay(self._harness, block)
            except Exception as error:
                if not self._started:
                    raise
                self._raised = error  # raised once the earlier blocks, replayed by children, are read
            return
        if not self._started:
            # one replayed step here first, so that what the reference compiles on its first call
            # (its numba helpers) compiles once, in this process, not once in every child
            replay(self._harness, dataclasses.replace(block, steps=block.steps[:1], sample=block.sample[:1]))
        folder = tempfile.TemporaryDirectory(prefix="kernelgym-replays-")
        result = os.path.join(folder.name, "result.json")

        def work() -> None:
            found = replay(self._harness, block)
            write_json(result, None if found is None else [found[0], sorted(found[1].items())])

        self._started.append((block, fork_child(work, folder.name), folder))

    def failed(self) -> bool:
        """Whether a block replayed so far (here, or by a child that has finished) found a failure:
        the batch need not step on."""
        if self._found is not None:
            return True
        return any(child.poll() == 0 and _read(folder) is not None for _block, child, folder in self._started)

    def first_failure(self) -> tuple[int, dict[int, list[str]]] | None:
        """The earliest failing block's first failure (as `replay`), waiting for the children in
        step order. A child that died is replayed here again: an exception the reference raises
        is raised here, as in one process."""
        try:
            for block, child, folder in self._started:
                child.wait()
                found = replay(self._harness, block) if child.returncode != 0 else _read(folder)
                if found is not None:
                    return found
            if self._raised is not None:
                raise self._raised
            return self._found
        finally:
            self.close()

    def close(self) -> None:
        """Stop the children still at work and remove their files."""
        for _block, child, folder in self._started:
            stop_child(child)
            folder.cleanup()
        self._started = []


def _read(folder) -> tuple[int, dict[int, list[str]]] | None:
    with open(os.path.join(folder.name, "result.json")) as file:
        found = json.load(file)
    return None if found is None else (found[0], {int(index): problems for index, problems in found[1]})


def _pick(state: dict, rows) -> dict:
    return {name: value[rows] for name, value in state.items()}


def reference_problems(harness, prev, streams, actions, obs, rewards, terminated, state, rng_after, pending, index):
    """What differs from the reference in env ``index``'s step (or reset, where one was pending),
    and the invariants it breaks after it; [] when it is the reference's, bit for bit."""
    new_state = env_slice(state, index)
    if pending[index]:
        return [
            "reset: " + text
            for text in harness.reset_problems(
                new_state,
                obs[index],
                rewards[index],
                terminated[index],
                streams[index],
                rng_after[index],
                previous=env_slice(prev, index),
            )
        ]
    step = (
        env_slice(prev, index),
        actions[index],
        streams[index],
        new_state,
        obs[index],
        rewards[index],
        terminated[index],
        rng_after[index],
    )
    if _same_as_reference(harness, *step):
        return harness.invariant_problems(new_state)
    return harness.step_problems(*step) + harness.invariant_problems(new_state)


def _same_as_reference(harness, prev, action, rng_row, new_state, obs, reward, terminated, rng_after) -> bool:
    """Whether the step is bit for bit the reference's: the common case, checked without the
    per-element tolerance arithmetic of `EnvHarness.step_problems` (which says what differs)."""
    expected, expected_reward, expected_terminated, expected_rng = harness.reference_step(prev, action, rng_row)
    return (
        bool(terminated) == expected_terminated
        and _identical(rng_after, expected_rng)
        and _identical(reward, np.asarray(expected_reward, np.float64).astype(np.float32))
        and all(_identical(new_state[name], expected[name]) for name in harness.state_dtypes)
        and _identical(np.asarray(obs), harness.reference_observe(new_state))
    )


def _identical(value: np.ndarray, expected) -> bool:
    """Whether ``value`` holds ``expected``'s values, bit for bit: one comparison of their bytes
    where the dtypes agree (a few hundred ns on a replayed step's small arrays; ``np.array_equal``
    takes microseconds), else as values. False sends the step to the comparison that says what
    differs, within tolerance: a NaN both give, or 0.0 against -0.0, is no difference there."""
    expected = np.asarray(expected)
    if value.dtype == expected.dtype:
        return value.shape == expected.shape and value.tobytes() == expected.tobytes()
    return np.array_equal(value, expected)
