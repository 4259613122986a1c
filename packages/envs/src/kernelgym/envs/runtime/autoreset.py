"""Autoreset, owned by the runtime: env kernels only step and only reset.

The runtime composes, per step, "reset the envs pending a reset, step the others, then
the bookkeeping" (time limit, episode counter, reset flags, SAME_STEP final
observation) from the env's kernels and the bodies below, bound by name
(`kernelgym.core.binding`). Env-layout envs get ONE launch per step:

- NEXT_STEP: ``if _done_[i]: restore rows, reset, clear outputs, clear episode
  else: step, count step``;
- SAME_STEP: ``step, count step, keep final obs; if _done_[i]: restore rows, reset,
  clear episode``.

Agent-layout envs run each phase as its own launch (a launch boundary is the barrier
between phases), with the per-env bookkeeping in one launch before and after them.
Rows of ``restore_on_reset`` state arrays come back through the data manager's
``save_copy_and_apply_at_reset`` copies (`kernelgym.core.builtin_kernels.restore_saved_rows`):
one reset mechanism for core and envs.
"""

from __future__ import annotations

from kernelgym.core import Branch, env_kernel
from kernelgym.core.builtin_kernels import clear_episode, restore_saved_rows

__all__ = ["reset_programs", "step_programs"]

DONE = "_done_"


@env_kernel
def clear_step_outputs(i, _reward_rows, terminated, _truncated):
    """A reset env shows reward 0 and neither flag."""
    for k in range(_reward_rows.shape[1]):
        _reward_rows[i, k] = 0.0
    terminated[i] = False
    _truncated[i] = False


@env_kernel
def clear_episode_statistics(i, _running_return_rows, _running_length, _episode_return_rows, _episode_length,
                             _episode_mask):
    """A reset env shows no finished episode and its episode sums restart.

    In NEXT_STEP mode this runs in the reset step, which (as in gymnasium's
    ``RecordEpisodeStatistics``) belongs to no episode.
    """
    for k in range(_running_return_rows.shape[1]):
        _running_return_rows[i, k] = 0.0
        _episode_return_rows[i, k] = 0.0
    _running_length[i] = 0
    _episode_length[i] = 0
    _episode_mask[i] = False


@env_kernel
def count_step(i, terminated, _truncated, _done_, _timestep_, _max_episode_steps, _reward_rows,
               _running_return_rows, _running_length, _episode_return_rows, _episode_length, _episode_mask):
    """One more step of the episode: the time limit, the flag for a reset, and the episode
    statistics (return and length of an episode that ends here, 0 elsewhere)."""
    _timestep_[i] += 1
    _truncated[i] = _timestep_[i] >= _max_episode_steps
    done = terminated[i] or _truncated[i]
    _done_[i] = done
    _running_length[i] += 1
    _episode_length[i] = _running_length[i] if done else 0
    if done:
        _running_length[i] = 0
    for k in range(_reward_rows.shape[1]):
        total = _running_return_rows[i, k] + _reward_rows[i, k]
        _episode_return_rows[i, k] = total if done else 0.0
        _running_return_rows[i, k] = 0.0 if done else total
    _episode_mask[i] = done


@env_kernel
def keep_final_obs(i, _done_, _obs_rows, _final_obs_rows, _final_obs_mask):
    """SAME_STEP: an env whose episode ended keeps its last observation (the reset overwrites obs)."""
    _final_obs_mask[i] = _done_[i] != 0
    if _done_[i]:
        for k in range(_obs_rows.shape[1]):
            _final_obs_rows[i, k] = _obs_rows[i, k]


# what a reset env shows: no reward, no flags, no finished episode, a step counter at 0
_FRESH_EPISODE = (clear_step_outputs, clear_episode_statistics, clear_episode)


def _restore(restores: bool) -> list:
    return [restore_saved_rows] if restores else []


def reset_programs(reset, layout: str, restores: bool) -> list:
    """Launches that reset every env whose ``_done_`` is set (what ``reset()`` runs)."""
    if layout == "env":
        return [[Branch(DONE, then=[*_restore(restores), *reset, *_FRESH_EPISODE])]]
    return [
        *([[Branch(DONE, then=[restore_saved_rows])]] if restores else []),
        *[[Branch(DONE, then=[phase])] for phase in reset],
        [Branch(DONE, then=[*_FRESH_EPISODE])],
    ]


def step_programs(step, reset, layout: str, same_step: bool, restores: bool) -> list:
    """Launches of one step with autoreset (see the module docstring)."""
    if layout == "env":
        if same_step:
            return [[*step, count_step, keep_final_obs,
                     Branch(DONE, then=[*_restore(restores), *reset, clear_episode])]]
        return [[Branch(DONE, then=[*_restore(restores), *reset, *_FRESH_EPISODE],
                        otherwise=[*step, count_step])]]
    if same_step:
        return [
            *[[phase] for phase in step],
            [count_step, keep_final_obs, *([Branch(DONE, then=[restore_saved_rows])] if restores else [])],
            *[[Branch(DONE, then=[phase])] for phase in reset],
            [Branch(DONE, then=[clear_episode])],
        ]
    phases = max(len(step), len(reset))
    return [
        *([[Branch(DONE, then=[restore_saved_rows])]] if restores else []),
        *[[Branch(DONE, then=list(reset[k:k + 1]), otherwise=list(step[k:k + 1]))] for k in range(phases)],
        [Branch(DONE, then=[*_FRESH_EPISODE], otherwise=[count_step])],
    ]
