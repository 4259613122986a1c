"""`EpisodeModel`: the per-env bookkeeping the runtime promises, as a reference model.

Resets are compared exactly with the reference's reset from the env's RNG stream row
(the row before the step; in SAME_STEP mode, the row the reference's step leaves).

It follows every env through a sequence of steps and says what each step must show:
a reset exactly on the step after an episode ended (NEXT_STEP) or within it
(SAME_STEP, keeping the final observation), truncation exactly when the step counter
reaches the time limit and the counter restarting after every reset (from the
``EnvSpec.episode_step`` array's value after ``set_state``, and that array agreeing
with the counter after every step), ``terminated``
exactly when the CPU reference says so, and everything else a stepped env shows
matching ``reference.step``.
"""

from __future__ import annotations

import numpy as np

from kernelgym.envs.testing.harness import EnvHarness, StepResult, env_slice

__all__ = ["EpisodeModel"]


class EpisodeModel:
    """Episode step counters and pending resets of a batch of envs.

    Parameters
    ----------
    harness : EnvHarness
    num_envs : int
    max_episode_steps : int or None
        The env's time limit (None: no truncation).
    same_step : bool
        The env's autoreset mode is SAME_STEP (else NEXT_STEP).
    envs : list of int, optional
        The envs to follow (default all).
    """

    def __init__(self, harness: EnvHarness, num_envs: int, max_episode_steps: int | None, same_step: bool, envs=None):
        self.harness = harness
        self.envs = list(range(num_envs)) if envs is None else list(envs)
        self.max_episode_steps = max_episode_steps
        self.same_step = same_step
        self.steps = np.zeros(num_envs, dtype=np.int64)
        self.pending = np.zeros(num_envs, dtype=bool)

    def restart(self, index: int | None = None, state: dict | None = None) -> None:
        """Env ``index`` (or every env) starts counting its episode anew: after ``reset`` or ``set_state``.

        Parameters
        ----------
        index : int or None
            The env, or None for every env.
        state : dict or None
            What ``set_state`` wrote (one env's state for an ``index``, the batch for
            None): the count starts from its ``EnvSpec.episode_step`` array, as the
            runtime's does. None (after ``reset``): from 0.
        """
        where = slice(None) if index is None else index
        self.steps[where] = self.harness.episode_steps(state)
        self.pending[where] = False

    def start_problems(self, obs: np.ndarray, state: dict, streams: np.ndarray, streams_after=None) -> list[str]:
        """Every env must show the reference's start state from its stream row and its observation (after ``reset``)."""
        harness = self.harness
        found = []
        for index in self.envs:
            env_state = env_slice(state, index)
            after = None if streams_after is None else streams_after[index]
            problems = harness.start_state_problems(env_state, streams[index], after)
            problems += harness.observation_problems(obs[index], env_state)
            problems += harness.invariant_problems(env_state)
            if problems:
                found.append(harness.env_problem(index, problems))
        return found

    def step_problems(
        self, prev: dict, streams: np.ndarray, actions: np.ndarray, result: StepResult, envs=None
    ) -> list[str]:
        """Check one step of every env against the model and the reference; advance the model.

        ``prev`` and ``streams`` are the state and RNG stream rows before the step.
        ``envs``: the followed envs that stepped (default all; a deferred refusal steps
        only the envs with good actions).
        """
        found = []
        for index in self.envs if envs is None else [index for index in self.envs if index in envs]:
            prev_env = env_slice(prev, index)
            problems = self._env_step(index, prev_env, streams[index], actions[index], result)
            if problems:
                found.append(self.harness.env_problem(index, problems, prev_env, actions[index]))
        return found

    def _env_step(self, index: int, prev: dict, stream, action, result: StepResult) -> list[str]:
        harness = self.harness
        new_state = result.env_slice(index)
        obs, reward = result.obs[index], result.rewards[index]
        terminated, truncated = bool(result.terminated[index]), bool(result.truncated[index])
        if self.pending[index]:
            # NEXT_STEP: the step after the episode ended is the reset.
            problems = [
                "pending reset: " + text
                for text in harness.reset_problems(
                    new_state, obs, reward, terminated, stream, result.rng[index], previous=prev
                )
            ]
            if truncated:
                problems.append("truncated True on a reset step, expected False")
            self.restart(index)
            return problems
        self.steps[index] += 1
        limit = self.max_episode_steps
        problems = []
        expected_truncated = limit is not None and self.steps[index] >= limit
        if truncated != expected_truncated:
            problems.append(f"truncated {truncated} after {self.steps[index]} steps of the episode, time limit {limit}")
        done = terminated or truncated
        if self.same_step and done:
            problems += self._same_step_reset(index, prev, stream, action, result)
            self.restart(index)
            return problems
        if self.same_step and bool(result.final_mask[index]):
            problems.append("info['_final_obs'] True for an env whose episode did not end")
        problems += harness.step_problems(prev, action, stream, new_state, obs, reward, terminated, result.rng[index])
        problems += self._episode_step_problems(index, new_state)
        self.pending[index] = done and not self.same_step
        return problems

    def _episode_step_problems(self, index: int, state: dict) -> list[str]:
        """The env's own step count (``EnvSpec.episode_step``) must agree with the runtime's."""
        name = self.harness.spec.episode_step
        if name is None or int(state[name]) == self.steps[index]:
            return []
        return [
            f"state {name!r} (the spec's episode_step) = {int(state[name])} after "
            f"{self.steps[index]} steps of the episode"
        ]

    def _same_step_reset(self, index: int, prev: dict, stream, action, result: StepResult) -> list[str]:
        """SAME_STEP: the step's reward and flags, the final observation kept, the exact fresh start."""
        harness = self.harness
        problems, stream_after_step = [], None
        if not bool(result.final_mask[index]):
            problems.append("info['_final_obs'] False for an env whose episode ended (SAME_STEP)")
        else:
            found, stream_after_step = harness.final_step_problems(
                prev, action, stream, result.final_obs[index], result.rewards[index], result.terminated[index]
            )
            problems += found
        new_state = result.env_slice(index)
        start = (
            []
            if stream_after_step is None
            else harness.start_state_problems(new_state, stream_after_step, result.rng[index], previous=prev)
        )
        problems += [
            "after the same-step reset: " + text
            for text in start + harness.observation_problems(result.obs[index], new_state)
        ]
        return problems
