"""Autoreset, owned by the runtime: env kernels only step and only reset.

The runtime composes, per step, "reset the envs pending a reset, step the others, then
the bookkeeping" (time limit, episode counter, reset flags, SAME_STEP final
observation) from the env's kernels and the bodies below, bound by name
(`kernelgym.core.binding`). Env-layout envs get ONE launch per step:

- NEXT_STEP: ``if _done_[i]: restore rows, reset, clear outputs, clear episode
  else: step, count step``;
- SAME_STEP: ``step, count step, keep final obs; if _done_[i]: restore rows, reset,
  clear episode``.

"count step" also keeps the episode statistics unless the env was made with
``episode_statistics=False`` (they cost about a tenth of a CartPole step on cpu).

Agent-layout envs run each phase as its own program, with the per-env bookkeeping in one
program before and after them; `kernelgym.core.bind_launches` runs them as one launch with
block barriers between them where an env's agents fit one block, else one launch each.
Rows of ``restore_on_reset`` state arrays come back through the data manager's
``save_copy_and_apply_at_reset`` copies (`kernelgym.core.builtin_kernels.restore_saved_rows`):
one reset mechanism for core and envs.
"""

from __future__ import annotations

import functools

from kernelgym.core import Branch, device_function, env_kernel
from kernelgym.core.builtin_kernels import clear_episode, restore_saved_rows

__all__ = ["reset_programs", "step_programs"]

DONE = "_done_"


# Each reset body comes in two forms: one reward per env (a single store, no loop) and one
# reward per agent (a loop over the reward row). The loop, run in the rare reset branch of
# every env's launch, cost about 5% of a CartPole step.
@env_kernel
def clear_step_output(i, rewards, terminated, _truncated):
    """A reset env shows reward 0 and neither flag (one reward per env)."""
    rewards[i] = 0.0
    terminated[i] = False
    _truncated[i] = False


@env_kernel
def clear_step_outputs(i, _reward_rows, terminated, _truncated):
    """`clear_step_output` for envs with one reward per agent."""
    for k in range(_reward_rows.shape[1]):
        _reward_rows[i, k] = 0.0
    terminated[i] = False
    _truncated[i] = False


@env_kernel
def clear_episode_return(i, _running_return_rows, _episode_return_rows, _episode_length, _episode_mask):
    """A reset env shows no finished episode and its return sum restarts (one reward per env).

    In NEXT_STEP mode this runs in the reset step, which (as in gymnasium's
    ``RecordEpisodeStatistics``) belongs to no episode.
    """
    _running_return_rows[i, 0] = 0.0
    _episode_return_rows[i, 0] = 0.0
    _episode_length[i] = 0
    _episode_mask[i] = False


@env_kernel
def clear_episode_returns(i, _running_return_rows, _episode_return_rows, _episode_length, _episode_mask):
    """`clear_episode_return` for envs with one reward per agent (a return per agent)."""
    for k in range(_running_return_rows.shape[1]):
        _running_return_rows[i, k] = 0.0
        _episode_return_rows[i, k] = 0.0
    _episode_length[i] = 0
    _episode_mask[i] = False


@device_function
def _advance_episode(i, terminated, _truncated, _done_, _timestep_, _max_episode_steps):
    """One more step of env ``i``'s episode: the time limit and the flag for a reset.

    Returns whether the episode ended and its length so far (the step counter).
    """
    steps = _timestep_[i] + 1
    _timestep_[i] = steps
    truncated = steps >= _max_episode_steps
    _truncated[i] = truncated
    done = terminated[i] or truncated
    _done_[i] = done
    return done, steps


@env_kernel
def count_step(i, terminated, _truncated, _done_, _timestep_, _max_episode_steps):
    """One more step of the episode: the time limit and the flag for a reset."""
    _advance_episode(i, terminated, _truncated, _done_, _timestep_, _max_episode_steps)


# Branch-free: every store happens at every step. A test of "ended now or last step" to skip
# them cost about 5% of a CartPole step in mispredicted branches.
@env_kernel
def count_step_with_statistics(
    i,
    terminated,
    _truncated,
    _done_,
    _timestep_,
    _max_episode_steps,
    rewards,
    _running_return_rows,
    _episode_return_rows,
    _episode_length,
    _episode_mask,
):
    """`count_step` and the episode statistics (one reward per env): the return and
    length of an episode that ends here, 0 elsewhere."""
    done, steps = _advance_episode(i, terminated, _truncated, _done_, _timestep_, _max_episode_steps)
    total = _running_return_rows[i, 0] + rewards[i]
    _running_return_rows[i, 0] = 0.0 if done else total
    _episode_return_rows[i, 0] = total if done else 0.0
    _episode_length[i] = steps if done else 0
    _episode_mask[i] = done


@env_kernel
def count_agents_step_with_statistics(
    i,
    terminated,
    _truncated,
    _done_,
    _timestep_,
    _max_episode_steps,
    _reward_rows,
    _running_return_rows,
    _episode_return_rows,
    _episode_length,
    _episode_mask,
):
    """`count_step_with_statistics` for envs with one reward per agent (a return per agent)."""
    done, steps = _advance_episode(i, terminated, _truncated, _done_, _timestep_, _max_episode_steps)
    for k in range(_reward_rows.shape[1]):
        total = _running_return_rows[i, k] + _reward_rows[i, k]
        _running_return_rows[i, k] = 0.0 if done else total
        _episode_return_rows[i, k] = total if done else 0.0
    _episode_length[i] = steps if done else 0
    _episode_mask[i] = done


@env_kernel
def keep_final_obs(i, _done_, _obs_rows, _final_obs_rows, _final_obs_mask):
    """SAME_STEP: an env whose episode ended keeps its last observation (the reset overwrites obs)."""
    _final_obs_mask[i] = _done_[i] != 0
    if _done_[i]:
        for k in range(_obs_rows.shape[1]):
            _final_obs_rows[i, k] = _obs_rows[i, k]


@env_kernel
def mark_final_obs(i, _done_, _final_obs_mask):
    """SAME_STEP, structured observations: which envs hold a final observation (leaves copied apart)."""
    _final_obs_mask[i] = _done_[i] != 0


# A kernel binds its values by parameter name, so each leaf of a Dict/Tuple observation gets
# its own copy body, made from this source with the leaf's (identifier) kernel name.
_KEEP_FINAL_LEAF = """
def keep_final_{name}(i, _done_, _obs_rows_{name}, _final_obs_rows_{name}):
    if _done_[i]:
        for k in range(_obs_rows_{name}.shape[1]):
            _final_obs_rows_{name}[i, k] = _obs_rows_{name}[i, k]
"""


@functools.cache
def keep_final_leaf(name: str):
    """SAME_STEP: `keep_final_obs` for the leaf ``name`` of a structured observation (made once per name)."""
    if not name.isidentifier():
        raise ValueError(f"keep_final_leaf name: expected a Python identifier, got {name!r}")
    namespace: dict = {}
    # the source is the fixed template above with an identifier substituted: nothing else runs
    exec(compile(_KEEP_FINAL_LEAF.format(name=name), f"<kernelgym keep_final_{name}>", "exec"), namespace)
    body = namespace[f"keep_final_{name}"]
    body.__module__ = __name__
    return env_kernel(body)


def _fresh_episode(statistics: bool, per_agent_rewards: bool) -> list:
    """What a reset env shows: no reward, no flags, no finished episode, a step counter at 0."""
    if per_agent_rewards:
        return [clear_step_outputs, *([clear_episode_returns] if statistics else []), clear_episode]
    return [clear_step_output, *([clear_episode_return] if statistics else []), clear_episode]


def _count(statistics: bool, per_agent_rewards: bool):
    if not statistics:
        return count_step
    return count_agents_step_with_statistics if per_agent_rewards else count_step_with_statistics


def _restore(restores: bool) -> list:
    return [restore_saved_rows] if restores else []


def reset_programs(reset, layout: str, restores: bool, statistics: bool, per_agent_rewards: bool) -> list:
    """Launches that reset every env whose ``_done_`` is set (what ``reset()`` runs)."""
    if layout == "env":
        return [[Branch(DONE, then=[*_restore(restores), *reset, *_fresh_episode(statistics, per_agent_rewards)])]]
    return [
        *([[Branch(DONE, then=[restore_saved_rows])]] if restores else []),
        *[[Branch(DONE, then=[phase])] for phase in reset],
        [Branch(DONE, then=_fresh_episode(statistics, per_agent_rewards))],
    ]


def step_programs(
    step,
    reset,
    layout: str,
    same_step: bool,
    restores: bool,
    statistics: bool,
    per_agent_rewards: bool,
    keep_final=(keep_final_obs,),
) -> list:
    """Launches of one step with autoreset (see the module docstring); ``keep_final``: the bodies
    keeping a SAME_STEP final observation (`keep_final_obs`, or one per leaf of a structured one)."""
    count = _count(statistics, per_agent_rewards)
    if layout == "env":
        if same_step:
            return [[*step, count, *keep_final, Branch(DONE, then=[*_restore(restores), *reset, clear_episode])]]
        return [
            [
                Branch(
                    DONE,
                    then=[*_restore(restores), *reset, *_fresh_episode(statistics, per_agent_rewards)],
                    otherwise=[*step, count],
                )
            ]
        ]
    if same_step:
        return [
            *[[phase] for phase in step],
            [count, *keep_final, *([Branch(DONE, then=[restore_saved_rows])] if restores else [])],
            *[[Branch(DONE, then=[phase])] for phase in reset],
            [Branch(DONE, then=[clear_episode])],
        ]
    phases = max(len(step), len(reset))
    return [
        *([[Branch(DONE, then=[restore_saved_rows])]] if restores else []),
        *[[Branch(DONE, then=list(reset[k : k + 1]), otherwise=list(step[k : k + 1]))] for k in range(phases)],
        [Branch(DONE, then=_fresh_episode(statistics, per_agent_rewards), otherwise=[count])],
    ]
