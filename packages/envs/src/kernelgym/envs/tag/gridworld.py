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

Observation of each agent with ``use_full_observation`` (the default, ``4 * num_agents + 1``
floats): ``x / grid_length`` of every agent, then ``y / grid_length`` of every agent, then
every agent's type (0 tagger, 1 runner in the game, -1 runner tagged out), then a
one-hot of the observer, then ``t / episode_length``.

Partial observation (``use_full_observation=False``, WarpDrive's, 6 floats): the agent's
own ``x / grid_length`` and ``y / grid_length``; the ``x / grid_length`` and
``y / grid_length`` of its target (for a tagger the nearest runner still in the game, for a
runner the nearest tagger; nearest by squared grid distance, ties to the lowest agent id);
1.0 for a runner (in the game or not), 0.0 for a tagger; ``t / episode_length``. When no
runner is left (the last observation of a terminated episode) a tagger's target is the
nearest of all runners, all tagged out: with one runner that is the cell where it was
tagged, which is what WarpDrive's tagger observes (its single runner, in the game or not).

A step runs as the phases ``move``, ``tag``, ``finish``, a reset as ``place``,
``first_observation`` (see `kernelgym.envs.tag._common`). The rules are written once,
in the helpers below: the kernels and the exact single-env reference (``REFERENCE``,
agent by agent) both call them, so they agree bit for bit on cpu and sim.
"""

from __future__ import annotations

import dataclasses

import numba
import numpy as np
from gymnasium import spaces

from kernelgym.core import agent_kernel, atomic_add, device_function
from kernelgym.envs.hookspecs import hookimpl
from kernelgym.envs.spec import CPUReference, EnvSpec, StateArray
from kernelgym.envs.tag._common import check_game_invariants, one_env

NUM_ACTIONS = 5  # stay, +x, -x, +y, -y
PARTIAL_OBSERVATION_SIZE = 6  # own x, y; target x, y; runner flag; t / T


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
    use_full_observation: bool = True

    def __post_init__(self):
        for name, minimum in (("num_taggers", 1), ("num_runners", 1), ("grid_length", 1), ("episode_length", 1)):
            value = getattr(self, name)
            if value < minimum:
                raise ValueError(f"TagGridWorldParams {name}: expected an int >= {minimum}, got {value!r}")
        # obs are float32: positions and counts must stay exactly representable
        if self.grid_length > 2**24:
            raise ValueError(f"TagGridWorldParams grid_length: expected an int <= 2**24, got {self.grid_length!r}")
        # a kernel constant: an int or a string here would compile a different branch test
        if not isinstance(self.use_full_observation, (bool, np.bool_)):
            raise ValueError(
                f"TagGridWorldParams use_full_observation: expected a bool, got {self.use_full_observation!r}"
            )

    @property
    def num_agents(self) -> int:
        return self.num_taggers + self.num_runners

    @property
    def observation_size(self) -> int:
        """Floats per agent observation: ``4 * num_agents + 1`` full, 6 partial."""
        return 4 * self.num_agents + 1 if self.use_full_observation else PARTIAL_OBSERVATION_SIZE


# ------------------------------------------- the rules, once (kernels and reference)
# Rewards are float32 buffers updated in several phases: every update widens the stored
# value with np.float64() first, so cpu (where numba widens anyway), the simulator
# (which runs this code as Python, where float32 op float would stay float32) and the
# reference round alike.
@numba.njit(inline="always", cache=True)
def start_cell(agent, num_taggers, grid_length):
    """Where ``agent`` starts on both axes: taggers at the centre, runners at the corner."""
    return grid_length // 2 if agent < num_taggers else 0


@numba.njit(inline="always", cache=True)
def grid_move(x, y, action, grid_length, wall_hit_penalty):
    """An agent's cell after ``action``, clipped to the grid, and its reward for the move."""
    new_x = x + (action == 1) - (action == 2)
    new_y = y + (action == 3) - (action == 4)
    clipped_x = min(max(new_x, 0), grid_length)
    clipped_y = min(max(new_y, 0), grid_length)
    hit_wall = clipped_x != new_x or clipped_y != new_y
    return clipped_x, clipped_y, -wall_hit_penalty if hit_wall else 0.0


@numba.njit(inline="always", cache=True)
def end_of_step_reward(reward, is_tagger, in_game, tags, tag_reward_for_tagger, step_cost_for_tagger):
    """An agent's reward once the step's ``tags`` are known: tag rewards, else the step cost."""
    if is_tagger:
        if tags > 0:
            return reward + tag_reward_for_tagger * tags
        return reward - step_cost_for_tagger
    if in_game and tags == 0:
        return reward + step_cost_for_tagger
    return reward


@device_function
def on_a_taggers_cell(env, runner, loc_x, loc_y, num_taggers):
    """Whether a tagger of env ``env`` stands on ``runner``'s cell."""
    for tagger in range(num_taggers):
        if loc_x[env, tagger] == loc_x[env, runner] and loc_y[env, tagger] == loc_y[env, runner]:
            return True
    return False


@device_function
def nearest_agent(env, agent, first, last, loc_x, loc_y, in_game, in_game_only):
    """The agent of ids ``first .. last - 1`` nearest to ``agent`` (squared grid distance, ties
    to the lowest id); with ``in_game_only`` only agents still in the game count. -1 if none does."""
    best = -1
    best_distance = np.int64(0)
    for other in range(first, last):
        if in_game_only and not in_game[env, other]:
            continue
        # int64: a squared distance on a grid of side up to 2**24 overflows int32
        dx = np.int64(loc_x[env, other]) - np.int64(loc_x[env, agent])
        dy = np.int64(loc_y[env, other]) - np.int64(loc_y[env, agent])
        distance = dx * dx + dy * dy
        if best < 0 or distance < best_distance:
            best = other
            best_distance = distance
    return best


@device_function
def observe_partial(
    env, agent, num_agents, obs, loc_x, loc_y, in_game, timestep, num_taggers, grid_length, episode_length
):
    """``agent``'s partial observation (module docstring) into ``obs[env, agent]``."""
    if agent < num_taggers:
        target = nearest_agent(env, agent, num_taggers, num_agents, loc_x, loc_y, in_game, True)
        if target < 0:  # no runner left: the nearest of the tagged-out runners
            target = nearest_agent(env, agent, num_taggers, num_agents, loc_x, loc_y, in_game, False)
    else:
        target = nearest_agent(env, agent, 0, num_taggers, loc_x, loc_y, in_game, False)
    obs[env, agent, 0] = loc_x[env, agent] / grid_length
    obs[env, agent, 1] = loc_y[env, agent] / grid_length
    obs[env, agent, 2] = loc_x[env, target] / grid_length
    obs[env, agent, 3] = loc_y[env, target] / grid_length
    obs[env, agent, 4] = 0.0 if agent < num_taggers else 1.0
    obs[env, agent, 5] = timestep[env] / episode_length


@device_function
def observe_agent(
    env,
    agent,
    num_agents,
    obs,
    loc_x,
    loc_y,
    in_game,
    timestep,
    num_taggers,
    grid_length,
    episode_length,
    use_full_observation,
):
    """``agent``'s observation, full or partial (module docstring), into ``obs[env, agent]``."""
    if not use_full_observation:
        observe_partial(
            env, agent, num_agents, obs, loc_x, loc_y, in_game, timestep, num_taggers, grid_length, episode_length
        )
        return
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
def move(
    env, agent, num_agents, actions, rewards, loc_x, loc_y, in_game, timestep, tagged_now, grid_length, wall_hit_penalty
):
    """Phase 1: every agent still in the game moves (the clock ticks)."""
    if agent == 0:
        timestep[env] += 1
        tagged_now[env] = 0
    reward = 0.0
    if in_game[env, agent]:
        loc_x[env, agent], loc_y[env, agent], reward = grid_move(
            loc_x[env, agent], loc_y[env, agent], actions[env, agent], grid_length, wall_hit_penalty
        )
    rewards[env, agent] = reward


@agent_kernel
def tag(
    env,
    agent,
    num_agents,
    rewards,
    loc_x,
    loc_y,
    in_game,
    runners_left,
    tagged_now,
    num_taggers,
    tag_penalty_for_runner,
):
    """Phase 2: each runner still in the game checks whether a tagger shares its cell."""
    if agent < num_taggers or not in_game[env, agent]:
        return
    if on_a_taggers_cell(env, agent, loc_x, loc_y, num_taggers):
        in_game[env, agent] = False
        rewards[env, agent] = np.float64(rewards[env, agent]) - tag_penalty_for_runner
        # several runners of one env may be tagged at once: shared counters are atomic
        atomic_add(tagged_now, env, 1)
        atomic_add(runners_left, env, -1)


@agent_kernel
def finish(
    env,
    agent,
    num_agents,
    obs,
    rewards,
    terminated,
    loc_x,
    loc_y,
    in_game,
    timestep,
    runners_left,
    tagged_now,
    num_taggers,
    grid_length,
    episode_length,
    tag_reward_for_tagger,
    step_cost_for_tagger,
    use_full_observation,
):
    """Phase 3: tag and step rewards, observations, and the terminated flag."""
    rewards[env, agent] = end_of_step_reward(
        np.float64(rewards[env, agent]),
        agent < num_taggers,
        in_game[env, agent],
        tagged_now[env],
        tag_reward_for_tagger,
        step_cost_for_tagger,
    )
    observe_agent(
        env,
        agent,
        num_agents,
        obs,
        loc_x,
        loc_y,
        in_game,
        timestep,
        num_taggers,
        grid_length,
        episode_length,
        use_full_observation,
    )
    if agent == 0:
        terminated[env] = runners_left[env] == 0


# ----------------------------------------------------------------- reset phases
@agent_kernel
def place(
    env,
    agent,
    num_agents,
    loc_x,
    loc_y,
    in_game,
    timestep,
    runners_left,
    tagged_now,
    num_taggers,
    num_runners,
    grid_length,
):
    """Reset phase 1: every agent on its start cell, the counters at their start."""
    cell = start_cell(agent, num_taggers, grid_length)
    loc_x[env, agent] = cell
    loc_y[env, agent] = cell
    in_game[env, agent] = True
    if agent == 0:
        timestep[env] = 0
        runners_left[env] = num_runners
        tagged_now[env] = 0


@agent_kernel
def first_observation(
    env,
    agent,
    num_agents,
    obs,
    loc_x,
    loc_y,
    in_game,
    timestep,
    num_taggers,
    grid_length,
    episode_length,
    use_full_observation,
):
    """Reset phase 2: every agent observes the start state (all agents are placed)."""
    observe_agent(
        env,
        agent,
        num_agents,
        obs,
        loc_x,
        loc_y,
        in_game,
        timestep,
        num_taggers,
        grid_length,
        episode_length,
        use_full_observation,
    )


# ---------------------------------------------------------------- exact reference
def reference_reset(params, rng_states=None):
    """The start state of one env (deterministic: ``rng_states`` is not drawn from)."""
    start = np.array(
        [start_cell(agent, params.num_taggers, params.grid_length) for agent in range(params.num_agents)],
        dtype=np.int32,
    )
    return {
        "loc_x": start.copy(),
        "loc_y": start.copy(),
        "in_game": np.ones(params.num_agents, dtype=bool),
        "timestep": np.int32(0).reshape(()),
        "runners_left": np.int32(params.num_runners).reshape(()),
        "tagged_now": np.int32(0).reshape(()),
    }


def reference_step(params, state, action, rng_states=None):
    """One step of one env, agent by agent (the sequential ground truth), with the kernels' rules."""
    p = params
    batch = one_env(state)
    loc_x, loc_y, in_game = batch["loc_x"][0], batch["loc_y"][0], batch["in_game"][0]
    action = np.asarray(action, dtype=np.int64)
    reward = np.zeros(p.num_agents, np.float32)
    for agent in range(p.num_agents):
        if in_game[agent]:
            loc_x[agent], loc_y[agent], reward[agent] = grid_move(
                int(loc_x[agent]), int(loc_y[agent]), int(action[agent]), p.grid_length, p.wall_hit_penalty
            )
    tags = 0
    for runner in range(p.num_taggers, p.num_agents):
        if in_game[runner] and on_a_taggers_cell(0, runner, batch["loc_x"], batch["loc_y"], p.num_taggers):
            in_game[runner] = False
            reward[runner] = np.float64(reward[runner]) - p.tag_penalty_for_runner
            tags += 1
    for agent in range(p.num_agents):
        reward[agent] = end_of_step_reward(
            np.float64(reward[agent]),
            agent < p.num_taggers,
            bool(in_game[agent]),
            tags,
            p.tag_reward_for_tagger,
            p.step_cost_for_tagger,
        )
    runners_left = int(state["runners_left"]) - tags
    new_state = {
        "loc_x": loc_x,
        "loc_y": loc_y,
        "in_game": in_game,
        "timestep": np.int32(int(state["timestep"]) + 1).reshape(()),
        "runners_left": np.int32(runners_left).reshape(()),
        "tagged_now": np.int32(tags).reshape(()),
    }
    return new_state, reward, runners_left == 0


def reference_observe(params, state):
    """Every agent's observation, shape ``(num_agents, params.observation_size)``."""
    batch = one_env(state)
    obs = np.zeros((1, params.num_agents, params.observation_size), np.float32)
    for agent in range(params.num_agents):
        observe_agent(
            0,
            agent,
            params.num_agents,
            obs,
            batch["loc_x"],
            batch["loc_y"],
            batch["in_game"],
            batch["timestep"],
            params.num_taggers,
            params.grid_length,
            params.episode_length,
            params.use_full_observation,
        )
    return obs[0]


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
            "runners_left": np.int32(in_game[params.num_taggers :].sum()).reshape(()),
            "tagged_now": np.int32(0).reshape(()),
        }

    return st.builds(
        build, cells, cells, runners_out.filter(lambda out: not all(out)), st.integers(0, params.episode_length - 1)
    )


def check_invariants(params, state):
    """Agents stay on the grid, taggers never leave the game, the runners count is right."""
    for axis in ("loc_x", "loc_y"):
        cells = state[axis]
        assert np.all((cells >= 0) & (cells <= params.grid_length)), f"{axis} {cells} off the grid"
    check_game_invariants(params, state)


# The state bounds set_state enforces (`StateArray.low`/``high``): positions index the grid.
def _grid_length(params):
    return params.grid_length


def _episode_length(params):
    return params.episode_length


def _num_runners(params):
    return params.num_runners


def _num_agents(params):
    return params.num_agents


def _observation_space(params):
    # the full observation's types are -1 for a tagged-out runner; the partial one is in [0, 1]
    low = -1.0 if params.use_full_observation else 0.0
    return spaces.Box(low=low, high=1.0, shape=(params.observation_size,), dtype=np.float32)


SPEC = EnvSpec(
    id="TagGridWorld-v0",
    observation_space=_observation_space,
    action_space=spaces.Discrete(NUM_ACTIONS),
    state=(
        StateArray("loc_x", np.int32, per_agent=True, low=0, high=_grid_length),
        StateArray("loc_y", np.int32, per_agent=True, low=0, high=_grid_length),
        StateArray("in_game", np.bool_, per_agent=True, initial=True),
        StateArray("timestep", np.int32, low=0, high=_episode_length),
        StateArray("runners_left", np.int32, low=0, high=_num_runners),
        StateArray("tagged_now", np.int32, low=0, high=_num_agents),
    ),
    step_kernel=(move, tag, finish),
    reset_kernel=(place, first_observation),
    reference=REFERENCE,
    params=TagGridWorldParams(),
    num_agents=lambda params: params.num_agents,
    max_episode_steps=lambda params: params.episode_length,
    # the env counts t for its observations: set_state starts the runtime's
    # truncation counter from it
    episode_step="timestep",
    kernel_layout="agent",
    render="kernelgym.envs.render:render_tag_gridworld",
    state_strategy=state_strategy,
    invariants=check_invariants,
    description="WarpDrive's tag on a grid: taggers chase runners (multi-agent)",
)


@hookimpl
def kernelgym_register_envs():
    """Provide TagGridWorld-v0."""
    return [SPEC]
