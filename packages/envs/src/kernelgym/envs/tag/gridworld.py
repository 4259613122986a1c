"""TagGridWorld: WarpDrive's discrete game of tag, taggers chasing runners on a grid.

Agents ``0 .. num_taggers - 1`` are taggers, the rest runners. Every agent stands on
an integer cell of the square ``[0, grid_length]^2``; taggers start at the centre
``(grid_length // 2, grid_length // 2)`` and runners at the corner ``(0, 0)``.

Each step every agent still in the game picks one of five actions: 0 stay, 1 +x,
2 -x, 3 +y, 4 -y. A move off the grid is clipped back and costs ``wall_hit_penalty``.
A runner is tagged when, after the moves, a tagger shares its cell: the runner gets
``-tag_penalty_for_runner`` and leaves the game (it stays on its cell, its actions are
ignored, its reward is 0 from then on). If any runner was tagged in a step, every
tagger gets ``tag_reward_for_tagger`` per runner tagged in that step; otherwise every
tagger pays ``step_cost_for_tagger`` and every runner still in the game earns it.
With the default single runner this is exactly WarpDrive's game.

The episode is **terminated** when no runner is left and **truncated** (by the
runtime) after ``episode_length`` steps.

Observation of each agent (full observation, ``4 * num_agents + 1`` floats):
``x / grid_length`` of every agent, then ``y / grid_length`` of every agent, then
every agent's type (0 tagger, 1 runner in the game, -1 runner tagged out), then a
one-hot of the observer, then ``t / episode_length``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from gymnasium import spaces

from kernelgym.core import agent_kernel, atomic_add, device_function
from kernelgym.envs.hookspecs import hookimpl
from kernelgym.envs.spec import CPUReference, EnvSpec, StateArray
from kernelgym.envs.tag._common import (
    RESET_INPUTS,
    STEP_INPUTS,
    PhasedKernel,
    check_game_invariants,
    kernel_arguments,
)

NUM_ACTIONS = 5
# (dx, dy) of actions stay, +x, -x, +y, -y
MOVES = np.array([[0, 0], [1, 0], [-1, 0], [0, 1], [0, -1]], dtype=np.int64)


@dataclasses.dataclass(frozen=True)
class TagGridWorldParams:
    """WarpDrive's parameters and defaults (``num_runners`` is kernelgym's addition)."""

    num_taggers: int = 10
    num_runners: int = 1
    grid_length: int = 10
    episode_length: int = 100
    wall_hit_penalty: float = 0.1
    tag_reward_for_tagger: float = 10.0
    tag_penalty_for_runner: float = 2.0
    step_cost_for_tagger: float = 0.01

    def __post_init__(self):
        for name, minimum in (("num_taggers", 1), ("num_runners", 1), ("grid_length", 1), ("episode_length", 1)):
            value = getattr(self, name)
            if value < minimum:
                raise ValueError(f"TagGridWorldParams {name}: expected an int >= {minimum}, got {value!r}")
        # obs are float32: positions and counts must stay exactly representable
        if self.grid_length > 2**24:
            raise ValueError(f"TagGridWorldParams grid_length: expected an int <= 2**24, got {self.grid_length!r}")

    @property
    def num_agents(self) -> int:
        return self.num_taggers + self.num_runners


# --------------------------------------------------------------- per-agent pieces
@device_function
def _reset_agent(env, agent, loc_x, loc_y, in_game, timestep, runners_left, tagged_now,
                 num_taggers, num_runners, grid_length):
    start = grid_length // 2 if agent < num_taggers else 0
    loc_x[env, agent] = start
    loc_y[env, agent] = start
    in_game[env, agent] = True
    if agent == 0:
        timestep[env] = 0
        runners_left[env] = num_runners
        tagged_now[env] = 0


@device_function
def _observe_agent(env, agent, num_agents, obs, loc_x, loc_y, in_game, timestep,
                   num_taggers, grid_length, episode_length):
    for other in range(num_agents):
        obs[env, agent, other] = loc_x[env, other] / grid_length
        obs[env, agent, num_agents + other] = loc_y[env, other] / grid_length
        if other < num_taggers:
            kind = 0.0
        elif in_game[env, other]:
            kind = 1.0
        else:
            kind = -1.0
        obs[env, agent, 2 * num_agents + other] = kind
        obs[env, agent, 3 * num_agents + other] = 1.0 if other == agent else 0.0
    obs[env, agent, 4 * num_agents] = timestep[env] / episode_length


# ------------------------------------------------------------------ step phases
@agent_kernel
def _step_move(env, agent, num_agents, actions, reset_mask, rewards,
               loc_x, loc_y, in_game, timestep, runners_left, tagged_now,
               num_taggers, num_runners, grid_length, wall_hit_penalty):
    """Phase 1: reset the env (NEXT_STEP autoreset) or move every agent still in the game."""
    if reset_mask[env]:
        _reset_agent(env, agent, loc_x, loc_y, in_game, timestep, runners_left, tagged_now,
                     num_taggers, num_runners, grid_length)
        rewards[env, agent] = 0.0
        return
    if agent == 0:
        timestep[env] += 1
        tagged_now[env] = 0
    reward = 0.0
    if in_game[env, agent]:
        action = actions[env, agent]
        x = loc_x[env, agent] + (action == 1) - (action == 2)
        y = loc_y[env, agent] + (action == 3) - (action == 4)
        clipped_x = min(max(x, 0), grid_length)
        clipped_y = min(max(y, 0), grid_length)
        if clipped_x != x or clipped_y != y:
            reward -= wall_hit_penalty
        loc_x[env, agent] = clipped_x
        loc_y[env, agent] = clipped_y
    rewards[env, agent] = reward


@agent_kernel
def _step_tag(env, agent, num_agents, reset_mask, rewards, loc_x, loc_y, in_game, runners_left, tagged_now,
              num_taggers, tag_penalty_for_runner):
    """Phase 2: each runner still in the game checks whether a tagger shares its cell."""
    if reset_mask[env] or agent < num_taggers or not in_game[env, agent]:
        return
    for tagger in range(num_taggers):
        if loc_x[env, tagger] == loc_x[env, agent] and loc_y[env, tagger] == loc_y[env, agent]:
            in_game[env, agent] = False
            rewards[env, agent] -= tag_penalty_for_runner
            # several runners of one env may be tagged at once: shared counters are atomic
            atomic_add(tagged_now, env, 1)
            atomic_add(runners_left, env, -1)
            break


@agent_kernel
def _step_finish(env, agent, num_agents, reset_mask, obs, rewards, terminated,
                 loc_x, loc_y, in_game, timestep, runners_left, tagged_now,
                 num_taggers, grid_length, episode_length, tag_reward_for_tagger, step_cost_for_tagger):
    """Phase 3: tag and step rewards, observations, and the terminated flag."""
    if not reset_mask[env]:
        tags = tagged_now[env]
        if agent < num_taggers:
            if tags > 0:
                rewards[env, agent] += tag_reward_for_tagger * tags
            else:
                rewards[env, agent] -= step_cost_for_tagger
        elif in_game[env, agent] and tags == 0:
            rewards[env, agent] += step_cost_for_tagger
    _observe_agent(env, agent, num_agents, obs, loc_x, loc_y, in_game, timestep,
                   num_taggers, grid_length, episode_length)
    if agent == 0:
        terminated[env] = runners_left[env] == 0 and not reset_mask[env]


# ----------------------------------------------------------------- reset phases
@agent_kernel
def _reset_start(env, agent, num_agents, reset_mask, loc_x, loc_y, in_game, timestep, runners_left, tagged_now,
                 num_taggers, num_runners, grid_length):
    """Put every agent of a flagged env on its start cell."""
    if reset_mask[env]:
        _reset_agent(env, agent, loc_x, loc_y, in_game, timestep, runners_left, tagged_now,
                     num_taggers, num_runners, grid_length)


@agent_kernel
def _reset_observe(env, agent, num_agents, reset_mask, obs, loc_x, loc_y, in_game, timestep,
                   num_taggers, grid_length, episode_length):
    """The first observation of every agent of a flagged env."""
    if reset_mask[env]:
        _observe_agent(env, agent, num_agents, obs, loc_x, loc_y, in_game, timestep,
                       num_taggers, grid_length, episode_length)


# ---------------------------------------------------------------- CPU reference
def reference_reset(params, generator=None):
    """The (deterministic) start state of one env."""
    num_agents = params.num_agents
    start = np.where(np.arange(num_agents) < params.num_taggers, params.grid_length // 2, 0).astype(np.int32)
    return {
        "loc_x": start.copy(),
        "loc_y": start.copy(),
        "in_game": np.ones(num_agents, dtype=bool),
        "timestep": np.int32(0).reshape(()),
        "runners_left": np.int32(params.num_runners).reshape(()),
        "tagged_now": np.int32(0).reshape(()),
    }


def reference_step(params, state, action, generator=None):
    """One step of one env, agent by agent in plain numpy (the sequential ground truth)."""
    taggers = np.arange(params.num_agents) < params.num_taggers
    in_game = state["in_game"].copy()
    moves = MOVES[np.asarray(action, dtype=np.int64)] * in_game[:, None]
    x = state["loc_x"].astype(np.int64) + moves[:, 0]
    y = state["loc_y"].astype(np.int64) + moves[:, 1]
    new_x, new_y = np.clip(x, 0, params.grid_length), np.clip(y, 0, params.grid_length)
    reward = np.where((new_x != x) | (new_y != y), -params.wall_hit_penalty, 0.0)
    tagged = np.zeros(params.num_agents, dtype=bool)
    for runner in np.flatnonzero(~taggers & in_game):
        tagged[runner] = np.any(taggers & (new_x == new_x[runner]) & (new_y == new_y[runner]))
    num_tagged = int(tagged.sum())
    reward[tagged] -= params.tag_penalty_for_runner
    in_game &= ~tagged
    if num_tagged:
        reward[taggers] += params.tag_reward_for_tagger * num_tagged
    else:
        reward[taggers] -= params.step_cost_for_tagger
        reward[~taggers & in_game] += params.step_cost_for_tagger
    runners_left = int(state["runners_left"]) - num_tagged
    new_state = {
        "loc_x": new_x.astype(np.int32),
        "loc_y": new_y.astype(np.int32),
        "in_game": in_game,
        "timestep": np.int32(int(state["timestep"]) + 1).reshape(()),
        "runners_left": np.int32(runners_left).reshape(()),
        "tagged_now": np.int32(num_tagged).reshape(()),
    }
    return new_state, reward.astype(np.float32), runners_left == 0


def reference_observe(params, state):
    """Every agent's full observation, shape ``(num_agents, 4 * num_agents + 1)``."""
    num_agents = params.num_agents
    taggers = np.arange(num_agents) < params.num_taggers
    kinds = np.where(taggers, 0.0, np.where(state["in_game"], 1.0, -1.0))
    common = np.concatenate(
        [state["loc_x"] / params.grid_length, state["loc_y"] / params.grid_length, kinds]
    )
    time = np.array([int(state["timestep"]) / params.episode_length])
    return np.stack(
        [np.concatenate([common, np.eye(num_agents)[agent], time]) for agent in range(num_agents)]
    ).astype(np.float32)


REFERENCE = CPUReference(reset=reference_reset, step=reference_step, observe=reference_observe)


def state_strategy(params):
    """Hypothesis strategy of consistent single-env states anywhere on the grid.

    ``timestep`` is drawn in ``[0, episode_length)``: a state at ``episode_length``
    ends its episode (the runtime truncates it), so no step can start from it.
    """
    from hypothesis import strategies as st

    num_agents = params.num_agents
    cells = st.lists(st.integers(0, params.grid_length), min_size=num_agents, max_size=num_agents)
    runners_out = st.lists(st.booleans(), min_size=params.num_runners, max_size=params.num_runners)

    def build(xs, ys, out, t):
        in_game = np.concatenate([np.ones(params.num_taggers, bool), ~np.array(out, dtype=bool)])
        return {
            "loc_x": np.array(xs, np.int32),
            "loc_y": np.array(ys, np.int32),
            "in_game": in_game,
            "timestep": np.int32(t).reshape(()),
            "runners_left": np.int32(in_game[params.num_taggers:].sum()).reshape(()),
            "tagged_now": np.int32(0).reshape(()),
        }

    return st.builds(build, cells, cells, runners_out.filter(lambda out: not all(out)),
                     st.integers(0, params.episode_length - 1))


def check_invariants(params, state):
    """Agents stay on the grid, taggers never leave the game, the runners count is right."""
    for axis in ("loc_x", "loc_y"):
        cells = state[axis]
        assert np.all((cells >= 0) & (cells <= params.grid_length)), f"{axis} {cells} off the grid"
    check_game_invariants(params, state)


def _observation_space(params):
    return spaces.Box(low=-1.0, high=1.0, shape=(4 * params.num_agents + 1,), dtype=np.float32)


SPEC = EnvSpec(
    id="TagGridWorld-v0",
    observation_space=_observation_space,
    action_space=spaces.Discrete(NUM_ACTIONS),
    state=(
        StateArray("loc_x", np.int32, per_agent=True),
        StateArray("loc_y", np.int32, per_agent=True),
        StateArray("in_game", np.bool_, per_agent=True, initial=True),
        StateArray("timestep", np.int32),
        StateArray("runners_left", np.int32),
        StateArray("tagged_now", np.int32),
    ),
    step_kernel=f"{__name__}:step_kernel",
    reset_kernel=f"{__name__}:reset_kernel",
    reference=f"{__name__}:REFERENCE",
    params=TagGridWorldParams(),
    num_agents=lambda params: params.num_agents,
    max_episode_steps=lambda params: params.episode_length,
    # the env counts t for its observations: set_state starts the runtime's
    # truncation counter from it
    episode_step="timestep",
    kernel_layout="agent",
    render="kernelgym.envs.render:render_tag_gridworld",
    state_strategy=f"{__name__}:state_strategy",
    invariants=f"{__name__}:check_invariants",
    description="WarpDrive's tag on a grid: taggers chase runners (multi-agent)",
)


step_kernel = PhasedKernel(kernel_arguments(STEP_INPUTS, SPEC), _step_move, _step_tag, _step_finish)
reset_kernel = PhasedKernel(kernel_arguments(RESET_INPUTS, SPEC), _reset_start, _reset_observe)


@hookimpl
def kernelgym_register_envs():
    """Provide TagGridWorld-v0."""
    return [SPEC]
