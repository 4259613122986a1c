"""TagContinuous: WarpDrive's continuous game of tag, with speeds, headings and turns.

Agents ``0 .. num_taggers - 1`` are taggers, the rest runners. Each agent has a
position in the square ``[0, grid_length]^2``, a speed, a direction and an
acceleration. Reset puts every agent at a uniform random position with a direction
drawn from {0, pi/2, pi, 3 pi/2}, speed and acceleration 0 (RNG: each agent draws its
own start from its own stream, ``kernelgym.core.rng.agent_stream(env, agent, num_agents)``:
no two agent threads share a stream).

Actions are pairs ``(acceleration index, turn index)`` (``MultiDiscrete``). As in
WarpDrive, index 0 is the no-op 0.0 and indices ``1 .. num_acceleration_levels`` are
evenly spaced over ``[min_acceleration, max_acceleration]`` (turns likewise over
``[min_turn, max_turn]``). Each step an agent still in the game turns (the direction
wraps modulo 2 pi), adds the acceleration to its acceleration, sets its speed to
``clip(speed + acceleration, 0, max_speed * skill level)`` (the acceleration is zeroed
when the speed hits a bound), moves by ``speed * (cos, sin)`` and is clipped back into
the square, receiving ``edge_hit_penalty`` (<= 0) when it crossed the edge. Agents in
the game also receive ``step_penalty_for_tagger`` or ``step_reward_for_runner``.

A runner still in the game is tagged when its nearest tagger (ties: lowest index) is
closer than ``tagging_distance * grid_length``: the runner gets
``tag_penalty_for_runner`` (<= 0), that tagger ``tag_reward_for_tagger``, and with
``runner_exits_game_after_tagged`` the runner leaves the game (frozen, reward 0 from
then on). At the last step (``t == episode_length``) every runner still in the game
gets ``end_of_game_reward_for_runner``. The episode is **terminated** when no runner
is left and **truncated** (by the runtime) after ``episode_length`` steps.

Observation of agent ``i`` (float32, ``7 * (1 + K) + 1`` values):

- its own block: ``x / L, y / L, speed / max_speed, direction / 2 pi,
  acceleration / max_speed, type, in_game`` (type 1 tagger, 0 runner, as WarpDrive);
- one block per observed agent ``j``: ``(x_j - x_i) / D, (y_j - y_i) / D,
  (speed_j - speed_i) / max_speed, (direction_j - direction_i) / 2 pi,
  (acceleration_j - acceleration_i) / max_speed, type_j, in_game_j`` with
  ``D = L * sqrt(2)``. With ``use_full_observation`` the ``K = num_agents - 1`` others
  in index order (agents out of the game included, with in_game 0); otherwise the
  ``K = num_other_agents_observed`` nearest agents still in the game, nearest first,
  zero blocks when fewer are left;
- ``t / episode_length``.

Nearest agents: the ``K`` first others still in the game in the order of (squared
distance, index), the squared distance taken in float64 from the float32 positions
(`_squared_distance`); equal distances go to the lower index. Each step (and reset)
the phase ``bin_agents`` sorts the env's agents still in the game into a uniform grid
of ``grid_side ** 2`` cells over the square (a counting sort in index order, by agent
0 of the env: ``cell_start``, ``cell_agents``), and with ``grid_neighbours`` each
agent searches the grid ring by ring around its cell (`nearest_by_grid`), O(K) cells
instead of all ``num_agents``. The reference keeps the all-pairs search
(``grid_neighbours`` off), and the kit proves both give the same bits.

A step runs as the phases ``move``, ``tag``, ``bin_agents``, ``finish``, a reset as
``start``, ``bin_agents``, ``first_observation`` (see `kernelgym.envs.tag._common`). The rules are written once,
in the helpers below: the kernels and the exact single-env reference (``REFERENCE``,
agent by agent) both call them, so they agree bit for bit on cpu and sim.
"""

from __future__ import annotations

import dataclasses
import math

import numba
import numpy as np
from gymnasium import spaces

from kernelgym.core import agent_kernel, atomic_add, device_function, rng
from kernelgym.core.portable_math import sincos
from kernelgym.envs.hookspecs import hookimpl
from kernelgym.envs.spec import CPUReference, EnvSpec, StateArray
from kernelgym.envs.tag._common import check_game_invariants, one_env

TWO_PI = 2.0 * math.pi
FEATURES = 7  # values per agent block in the observation


@dataclasses.dataclass(frozen=True)
class TagContinuousParams:
    """WarpDrive's parameters and defaults (kernels bind the fields they use by name)."""

    num_taggers: int = 1
    num_runners: int = 10
    grid_length: float = 10.0
    episode_length: int = 100
    max_speed: float = 1.0
    skill_level_tagger: float = 1.0
    skill_level_runner: float = 1.0
    max_acceleration: float = 1.0
    min_acceleration: float = -1.0
    max_turn: float = math.pi / 2
    min_turn: float = -math.pi / 2
    num_acceleration_levels: int = 10
    num_turn_levels: int = 10
    edge_hit_penalty: float = 0.0
    use_full_observation: bool = True
    num_other_agents_observed: int = 2
    tagging_distance: float = 0.01
    tag_reward_for_tagger: float = 1.0
    step_penalty_for_tagger: float = 0.0
    tag_penalty_for_runner: float = -1.0
    step_reward_for_runner: float = 0.0
    end_of_game_reward_for_runner: float = 1.0
    runner_exits_game_after_tagged: bool = True
    # kernelgym's: find the K nearest through a uniform grid (True) or all pairs (False);
    # both give the same observations bit for bit (see `nearest_by_grid`)
    grid_neighbours: bool = True

    def __post_init__(self):
        checks = (
            ("num_taggers", self.num_taggers >= 1, ">= 1"),
            ("num_runners", self.num_runners >= 1, ">= 1"),
            ("grid_length", self.grid_length > 0, "> 0"),
            ("episode_length", self.episode_length >= 1, ">= 1"),
            ("max_speed", self.max_speed > 0, "> 0"),
            ("skill_level_tagger", self.skill_level_tagger >= 0, ">= 0"),
            ("skill_level_runner", self.skill_level_runner >= 0, ">= 0"),
            ("max_acceleration", self.max_acceleration >= self.min_acceleration, ">= min_acceleration"),
            ("max_turn", self.max_turn >= self.min_turn, ">= min_turn"),
            ("num_acceleration_levels", self.num_acceleration_levels >= 1, ">= 1"),
            ("num_turn_levels", self.num_turn_levels >= 1, ">= 1"),
            ("edge_hit_penalty", self.edge_hit_penalty <= 0, "<= 0"),
            # only the partial observation uses it
            (
                "num_other_agents_observed",
                self.use_full_observation
                or 1 <= self.num_other_agents_observed <= self.num_taggers + self.num_runners - 1,
                "in [1, num_agents - 1]",
            ),
            ("tagging_distance", 0 <= self.tagging_distance <= 1, "in [0, 1]"),
            ("tag_reward_for_tagger", self.tag_reward_for_tagger >= 0, ">= 0"),
            ("step_penalty_for_tagger", self.step_penalty_for_tagger <= 0, "<= 0"),
            ("tag_penalty_for_runner", self.tag_penalty_for_runner <= 0, "<= 0"),
            ("step_reward_for_runner", self.step_reward_for_runner >= 0, ">= 0"),
            ("end_of_game_reward_for_runner", self.end_of_game_reward_for_runner >= 0, ">= 0"),
        )
        for name, ok, expected in checks:
            if not ok:
                raise ValueError(f"TagContinuousParams {name}: expected {expected}, got {getattr(self, name)!r}")

    @property
    def num_agents(self) -> int:
        return self.num_taggers + self.num_runners

    @property
    def grid_side(self) -> int:
        """Cells per side of the neighbour grid (`grid_side_for`)."""
        # its Python source: the host needs no compile (a registry lookup resolves this shape)
        return grid_side_for.py_func(self.num_agents)

    @property
    def num_observed(self) -> int:
        """How many other agents each observation describes."""
        return self.num_agents - 1 if self.use_full_observation else self.num_other_agents_observed


# ------------------------------------------- the rules, once (kernels and reference)
# Float32 array values are widened with np.float64() before any arithmetic: numba
# widens them anyway, but the simulator runs this code as Python, where NumPy would
# compute float32 op Python-float in float32 and the backends would drift apart.
@numba.njit(inline="always", cache=True)
def action_level(index, num_levels, low, high):
    """Index 0 is the no-op 0.0; indices 1..num_levels are evenly spaced over [low, high]."""
    if index == 0:
        return 0.0
    if num_levels == 1:
        return low
    return low + (high - low) * (index - 1) / (num_levels - 1)


@numba.njit(inline="always", cache=True)
def kinematics(
    x,
    y,
    speed,
    direction,
    acceleration,
    acceleration_index,
    turn_index,
    top_speed,
    grid_length,
    min_acceleration,
    max_acceleration,
    num_acceleration_levels,
    min_turn,
    max_turn,
    num_turn_levels,
):
    """One agent's move: the new (x, y, speed, direction, acceleration) and whether it crossed the edge.

    It turns (the direction wraps modulo 2 pi), adds the chosen acceleration, clips its
    speed to [0, top_speed] (zeroing the acceleration at a bound), moves by
    ``speed * (cos, sin)`` and is clipped back into the square.
    """
    heading = (direction + action_level(turn_index, num_turn_levels, min_turn, max_turn)) % TWO_PI
    accel = acceleration + action_level(acceleration_index, num_acceleration_levels, min_acceleration, max_acceleration)
    new_speed = min(max(speed + accel, 0.0), top_speed)
    if new_speed <= 0.0 or new_speed >= top_speed:
        accel = 0.0
    sin_heading, cos_heading = sincos(heading)
    x = x + new_speed * cos_heading
    y = y + new_speed * sin_heading
    crossed = x < 0.0 or x > grid_length or y < 0.0 or y > grid_length
    return min(max(x, 0.0), grid_length), min(max(y, 0.0), grid_length), new_speed, heading, accel, crossed


@numba.njit(inline="always", cache=True)
def move_reward(is_tagger, crossed_edge, step_penalty_for_tagger, step_reward_for_runner, edge_hit_penalty):
    """An agent's reward for its move: its step reward, plus the edge penalty when it crossed."""
    reward = step_penalty_for_tagger if is_tagger else step_reward_for_runner
    if crossed_edge:
        reward += edge_hit_penalty
    return reward


@numba.njit(inline="always", cache=True)
def grid_side_for(num_agents):
    """Cells per side of the neighbour grid: about one agent per cell (the 10 nearest then
    mostly lie within two rings: some 25 agents looked at instead of all)."""
    return max(1, int(math.sqrt(num_agents)))


@numba.njit(inline="always", cache=True)
def grid_axis_cell(position, side, grid_length):
    """The grid column (or row) of a coordinate in ``[0, grid_length]``."""
    return min(max(int(position * side / grid_length), 0), side - 1)


@device_function
def draw_start(env, agent, num_agents, rng_states, loc_x, loc_y, speed, direction, acceleration, in_game, grid_length):
    """Agent ``agent``'s start in env ``env``, drawn from the agent's own stream."""
    stream = rng.agent_stream(env, agent, num_agents)
    loc_x[env, agent] = rng.uniform_range(rng_states, stream, 0.0, grid_length)
    loc_y[env, agent] = rng.uniform_range(rng_states, stream, 0.0, grid_length)
    direction[env, agent] = rng.randint(rng_states, stream, 4) * (math.pi / 2.0)
    speed[env, agent] = 0.0
    acceleration[env, agent] = 0.0
    in_game[env, agent] = True


@device_function
def _squared_distance(env, a, b, loc_x, loc_y):
    dx = np.float64(loc_x[env, a]) - loc_x[env, b]
    dy = np.float64(loc_y[env, a]) - loc_y[env, b]
    return dx * dx + dy * dy


@device_function
def tagging_tagger(env, runner, loc_x, loc_y, num_taggers, tagging_distance, grid_length):
    """The tagger that tags ``runner``: its nearest (ties: lowest index), if close enough; else -1."""
    nearest = 0
    nearest_distance = _squared_distance(env, runner, 0, loc_x, loc_y)
    for tagger in range(1, num_taggers):
        distance = _squared_distance(env, runner, tagger, loc_x, loc_y)
        if distance < nearest_distance:
            nearest = tagger
            nearest_distance = distance
    margin = tagging_distance * grid_length
    return nearest if nearest_distance < margin * margin else -1


@device_function
def _write_block(
    env,
    agent,
    block,
    obs,
    other,
    loc_x,
    loc_y,
    speed,
    direction,
    acceleration,
    in_game,
    num_taggers,
    grid_length,
    max_speed,
):
    """Agent ``other`` as seen from ``agent`` into observation block ``block``."""
    base = FEATURES * block
    diagonal = grid_length * math.sqrt(2.0)
    obs[env, agent, base] = (np.float64(loc_x[env, other]) - loc_x[env, agent]) / diagonal
    obs[env, agent, base + 1] = (np.float64(loc_y[env, other]) - loc_y[env, agent]) / diagonal
    obs[env, agent, base + 2] = (np.float64(speed[env, other]) - speed[env, agent]) / max_speed
    obs[env, agent, base + 3] = (np.float64(direction[env, other]) - direction[env, agent]) / TWO_PI
    obs[env, agent, base + 4] = (np.float64(acceleration[env, other]) - acceleration[env, agent]) / max_speed
    obs[env, agent, base + 5] = 1.0 if other < num_taggers else 0.0
    obs[env, agent, base + 6] = 1.0 if in_game[env, other] else 0.0


# ------------------------------------------------------- the K nearest agents
# The grid search keeps the nearest found so far in the observer's own observation row,
# block b's agent index (exact in float32 below 2**24 agents) in the block's last value
# and its distance rounded to float32 in the first, sorted by (squared distance, index):
# no scratch memory, and no other thread reads the row.
@device_function
def _index_at(env, agent, obs, block):
    return int(obs[env, agent, FEATURES * block + FEATURES - 1])


@device_function
def _offer(env, agent, obs, other, distance, found, num_blocks, last, last_distance, loc_x, loc_y):
    """Insert ``other`` (at ``distance``) into the sorted list of ``found`` blocks if it is
    among the ``num_blocks`` first in (distance, index) order. Returns the new count and
    the list's last agent and distance (kept by the caller: most offers end at that test).

    Each block also keeps its distance rounded to float32 (in its first value): rounding
    is monotonic, so unequal rounded values order the exact ones, and only equal ones
    need the exact distance again.
    """
    dropped = found == num_blocks
    if dropped:
        if distance > last_distance or (distance == last_distance and other > last):
            return found, last, last_distance
        found -= 1  # the last one drops out
    rounded = np.float32(distance)
    block = found + 1
    while block > 1:
        base = FEATURES * (block - 1)
        previous = int(obs[env, agent, base + FEATURES - 1])
        previous_rounded = obs[env, agent, base]
        if previous_rounded < rounded:
            break
        if previous_rounded == rounded:
            previous_distance = _squared_distance(env, agent, previous, loc_x, loc_y)
            if previous_distance < distance or (previous_distance == distance and previous < other):
                break
        obs[env, agent, base + FEATURES] = previous_rounded
        obs[env, agent, base + 2 * FEATURES - 1] = previous
        block -= 1
    obs[env, agent, FEATURES * block] = rounded
    obs[env, agent, FEATURES * block + FEATURES - 1] = other
    found += 1
    if block == found:  # the new one is last
        return found, other, distance
    if dropped:  # the one before the dropped one is last now
        last = _index_at(env, agent, obs, found)
        return found, last, _squared_distance(env, agent, last, loc_x, loc_y)
    return found, last, last_distance  # the last one moved down a block


@device_function
def nearest_by_grid(
    env, agent, num_agents, obs, loc_x, loc_y, in_game, num_blocks, grid_length, cell_start, cell_agents
):
    """The nearest list the all-pairs reference finds (`observe_agent`), searching the grid
    ring by ring; returns how many blocks it filled.

    Ring ``r`` holds the cells ``r`` columns or rows (Chebyshev) from the observer's own.
    After rings ``0 .. r`` every agent not yet offered lies beyond the block of cells they
    cover (agents outside the square are binned to its edge cells, only farther), so at
    least the observer's distance to the nearest side of the block that has cells beyond
    it. The search stops once the list is full and its last distance is below that
    (strictly: an equal distance with a lower index could still come), with a relative
    margin of 1e-6 against rounding at cell edges, or when the block covers the grid.
    Offering agents in another order than all pairs changes nothing: the list is the
    first ``num_blocks`` in a total order.
    """
    side = grid_side_for(num_agents)
    width = np.float64(grid_length) / side
    px, py = np.float64(loc_x[env, agent]), np.float64(loc_y[env, agent])
    column = grid_axis_cell(px, side, grid_length)
    row = grid_axis_cell(py, side, grid_length)
    found, last, last_distance = 0, -1, 0.0
    for ring in range(side):
        for y in range(max(row - ring, 0), min(row + ring, side - 1) + 1):
            for x in range(max(column - ring, 0), min(column + ring, side - 1) + 1):
                if max(abs(x - column), abs(y - row)) != ring:
                    continue
                cell = y * side + x
                for slot in range(cell_start[env, cell], cell_start[env, cell + 1]):
                    other = cell_agents[env, slot]
                    if other != agent:
                        found, last, last_distance = _offer(
                            env,
                            agent,
                            obs,
                            other,
                            _squared_distance(env, agent, other, loc_x, loc_y),
                            found,
                            num_blocks,
                            last,
                            last_distance,
                            loc_x,
                            loc_y,
                        )
        reach = math.inf  # to the nearest side of the block with cells beyond it
        if column - ring > 0:
            reach = min(reach, px - (column - ring) * width)
        if column + ring < side - 1:
            reach = min(reach, (column + ring + 1) * width - px)
        if row - ring > 0:
            reach = min(reach, py - (row - ring) * width)
        if row + ring < side - 1:
            reach = min(reach, (row + ring + 1) * width - py)
        if reach == math.inf:
            break  # every cell searched
        reach *= 1.0 - 1e-6
        if found == num_blocks and reach > 0.0 and last_distance < reach * reach:
            break
    return found


@device_function
def bin_env(env, num_agents, loc_x, loc_y, in_game, grid_length, cell_start, cell_agents):
    """Sort env ``env``'s agents still in the game into the grid, in index order.

    Cell ``c`` holds ``cell_agents[env, cell_start[env, c]:cell_start[env, c + 1]]``,
    ascending; the rest of ``cell_agents`` is -1. A counting sort by one thread (the
    result does not depend on any thread order): counts of cell ``c`` go to slot ``c + 2``,
    a running sum makes slot ``c + 1`` the start of cell ``c``, and placing each agent
    advances that slot to the start of cell ``c + 1``.
    """
    side = grid_side_for(num_agents)
    cells = side * side
    for slot in range(cells + 2):
        cell_start[env, slot] = 0
    for agent in range(num_agents):
        if in_game[env, agent]:
            cell = grid_axis_cell(np.float64(loc_y[env, agent]), side, grid_length) * side + grid_axis_cell(
                np.float64(loc_x[env, agent]), side, grid_length
            )
            cell_start[env, cell + 2] += 1
    for slot in range(2, cells + 2):
        cell_start[env, slot] += cell_start[env, slot - 1]
    for slot in range(num_agents):
        cell_agents[env, slot] = -1
    for agent in range(num_agents):
        if in_game[env, agent]:
            cell = grid_axis_cell(np.float64(loc_y[env, agent]), side, grid_length) * side + grid_axis_cell(
                np.float64(loc_x[env, agent]), side, grid_length
            )
            cell_agents[env, cell_start[env, cell + 1]] = agent
            cell_start[env, cell + 1] += 1


@device_function
def observe_agent(
    env,
    agent,
    num_agents,
    obs,
    loc_x,
    loc_y,
    speed,
    direction,
    acceleration,
    in_game,
    timestep,
    num_taggers,
    grid_length,
    episode_length,
    max_speed,
    use_full_observation,
    num_other_agents_observed,
    grid_neighbours,
    cell_start,
    cell_agents,
):
    """``agent``'s observation (module docstring) into ``obs[env, agent]``."""
    obs[env, agent, 0] = np.float64(loc_x[env, agent]) / grid_length
    obs[env, agent, 1] = np.float64(loc_y[env, agent]) / grid_length
    obs[env, agent, 2] = np.float64(speed[env, agent]) / max_speed
    obs[env, agent, 3] = np.float64(direction[env, agent]) / TWO_PI
    obs[env, agent, 4] = np.float64(acceleration[env, agent]) / max_speed
    obs[env, agent, 5] = 1.0 if agent < num_taggers else 0.0
    obs[env, agent, 6] = 1.0 if in_game[env, agent] else 0.0
    if use_full_observation:
        num_blocks = num_agents - 1
        block = 1
        for other in range(num_agents):
            if other != agent:
                _write_block(
                    env,
                    agent,
                    block,
                    obs,
                    other,
                    loc_x,
                    loc_y,
                    speed,
                    direction,
                    acceleration,
                    in_game,
                    num_taggers,
                    grid_length,
                    max_speed,
                )
                block += 1
    else:
        num_blocks = num_other_agents_observed
        if grid_neighbours:
            found = nearest_by_grid(
                env, agent, num_agents, obs, loc_x, loc_y, in_game, num_blocks, grid_length, cell_start, cell_agents
            )
            # the search left block b's agent index in the block's last value: write the blocks
            for block in range(1, num_blocks + 1):
                if block > found:
                    for feature in range(FEATURES):
                        obs[env, agent, FEATURES * block + feature] = 0.0
                else:
                    _write_block(
                        env,
                        agent,
                        block,
                        obs,
                        _index_at(env, agent, obs, block),
                        loc_x,
                        loc_y,
                        speed,
                        direction,
                        acceleration,
                        in_game,
                        num_taggers,
                        grid_length,
                        max_speed,
                    )
        else:
            # the reference: k-nearest by repeated selection over all pairs, the next agent
            # after (last_distance, last_index) in (distance, index) order; O(k * num_agents)
            last_distance = -1.0
            last_index = -1
            for block in range(1, num_blocks + 1):
                best = -1
                best_distance = 0.0
                for other in range(num_agents):
                    if other == agent or not in_game[env, other]:
                        continue
                    distance = _squared_distance(env, agent, other, loc_x, loc_y)
                    after_last = distance > last_distance or (distance == last_distance and other > last_index)
                    if after_last and (best < 0 or distance < best_distance):
                        best = other
                        best_distance = distance
                if best < 0:
                    for feature in range(FEATURES):
                        obs[env, agent, FEATURES * block + feature] = 0.0
                else:
                    _write_block(
                        env,
                        agent,
                        block,
                        obs,
                        best,
                        loc_x,
                        loc_y,
                        speed,
                        direction,
                        acceleration,
                        in_game,
                        num_taggers,
                        grid_length,
                        max_speed,
                    )
                    last_distance = best_distance
                    last_index = best
    obs[env, agent, FEATURES * (num_blocks + 1)] = timestep[env] / episode_length


# ------------------------------------------------------------------ step phases
@agent_kernel
def move(
    env,
    agent,
    num_agents,
    actions,
    rewards,
    loc_x,
    loc_y,
    speed,
    direction,
    acceleration,
    in_game,
    timestep,
    num_taggers,
    grid_length,
    max_speed,
    skill_level_tagger,
    skill_level_runner,
    max_acceleration,
    min_acceleration,
    max_turn,
    min_turn,
    num_acceleration_levels,
    num_turn_levels,
    edge_hit_penalty,
    step_penalty_for_tagger,
    step_reward_for_runner,
):
    """Phase 1: every agent still in the game turns, accelerates and moves (the clock ticks)."""
    if agent == 0:
        timestep[env] += 1
    rewards[env, agent] = 0.0
    if not in_game[env, agent]:
        return
    is_tagger = agent < num_taggers
    top_speed = max_speed * (skill_level_tagger if is_tagger else skill_level_runner)
    (
        loc_x[env, agent],
        loc_y[env, agent],
        speed[env, agent],
        direction[env, agent],
        acceleration[env, agent],
        crossed,
    ) = kinematics(
        np.float64(loc_x[env, agent]),
        np.float64(loc_y[env, agent]),
        np.float64(speed[env, agent]),
        np.float64(direction[env, agent]),
        np.float64(acceleration[env, agent]),
        actions[env, agent, 0],
        actions[env, agent, 1],
        top_speed,
        grid_length,
        min_acceleration,
        max_acceleration,
        num_acceleration_levels,
        min_turn,
        max_turn,
        num_turn_levels,
    )
    rewards[env, agent] = move_reward(
        is_tagger, crossed, step_penalty_for_tagger, step_reward_for_runner, edge_hit_penalty
    )


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
    num_taggers,
    grid_length,
    tagging_distance,
    tag_reward_for_tagger,
    tag_penalty_for_runner,
    runner_exits_game_after_tagged,
):
    """Phase 2: each runner still in the game checks its nearest tagger."""
    if agent < num_taggers or not in_game[env, agent]:
        return
    tagger = tagging_tagger(env, agent, loc_x, loc_y, num_taggers, tagging_distance, grid_length)
    if tagger < 0:
        return
    rewards[env, agent] = np.float64(rewards[env, agent]) + tag_penalty_for_runner
    # one tagger may tag several runners in a step: its reward is shared. The sum is
    # taken in float32 (as CUDA's atomic add on a float32 does), so it is the same in
    # any order and on every backend.
    atomic_add(rewards, (env, tagger), np.float32(tag_reward_for_tagger))
    if runner_exits_game_after_tagged:
        in_game[env, agent] = False
        atomic_add(runners_left, env, -1)


@agent_kernel
def bin_agents(env, agent, num_agents, loc_x, loc_y, in_game, cell_start, cell_agents, grid_length):
    """Phase 3 of a step, 2 of a reset: agent 0 sorts its env's agents into the grid
    (the next phase reads it: a launch boundary between them)."""
    if agent == 0:
        bin_env(env, num_agents, loc_x, loc_y, in_game, grid_length, cell_start, cell_agents)


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
    speed,
    direction,
    acceleration,
    in_game,
    timestep,
    runners_left,
    cell_start,
    cell_agents,
    num_taggers,
    grid_length,
    episode_length,
    max_speed,
    use_full_observation,
    num_other_agents_observed,
    end_of_game_reward_for_runner,
    grid_neighbours,
):
    """Phase 4: the end-of-game reward, observations and the terminated flag."""
    if agent >= num_taggers and in_game[env, agent] and timestep[env] == episode_length:
        rewards[env, agent] = np.float64(rewards[env, agent]) + end_of_game_reward_for_runner
    observe_agent(
        env,
        agent,
        num_agents,
        obs,
        loc_x,
        loc_y,
        speed,
        direction,
        acceleration,
        in_game,
        timestep,
        num_taggers,
        grid_length,
        episode_length,
        max_speed,
        use_full_observation,
        num_other_agents_observed,
        grid_neighbours,
        cell_start,
        cell_agents,
    )
    if agent == 0:
        terminated[env] = runners_left[env] == 0


# ----------------------------------------------------------------- reset phases
@agent_kernel
def start(
    env,
    agent,
    num_agents,
    rng_states,
    loc_x,
    loc_y,
    speed,
    direction,
    acceleration,
    in_game,
    timestep,
    runners_left,
    num_runners,
    grid_length,
):
    """Reset phase 1: every agent draws its start from its own stream; the counters start."""
    draw_start(env, agent, num_agents, rng_states, loc_x, loc_y, speed, direction, acceleration, in_game, grid_length)
    if agent == 0:
        timestep[env] = 0
        runners_left[env] = num_runners


@agent_kernel
def first_observation(
    env,
    agent,
    num_agents,
    obs,
    loc_x,
    loc_y,
    speed,
    direction,
    acceleration,
    in_game,
    timestep,
    cell_start,
    cell_agents,
    num_taggers,
    grid_length,
    episode_length,
    max_speed,
    use_full_observation,
    num_other_agents_observed,
    grid_neighbours,
):
    """Reset phase 3: every agent observes the start state (all agents are drawn and binned)."""
    observe_agent(
        env,
        agent,
        num_agents,
        obs,
        loc_x,
        loc_y,
        speed,
        direction,
        acceleration,
        in_game,
        timestep,
        num_taggers,
        grid_length,
        episode_length,
        max_speed,
        use_full_observation,
        num_other_agents_observed,
        grid_neighbours,
        cell_start,
        cell_agents,
    )


# ---------------------------------------------------------------- exact reference
_PER_AGENT = ("loc_x", "loc_y", "speed", "direction", "acceleration", "in_game")


def reference_reset(params, rng_states):
    """One env's start state, drawn from its streams ``rng_states`` (``(num_agents, 2)`` uint64, agent
    ``a`` on row ``a``) as the kernel draws."""
    n = params.num_agents
    if np.shape(rng_states) != (n, 2):
        raise ValueError(
            f"rng_states: expected the env's {n} agent streams, shape ({n}, 2), got shape {np.shape(rng_states)}"
        )
    batch = {name: np.zeros((1, n), np.float32) for name in _PER_AGENT[:-1]}
    batch["in_game"] = np.zeros((1, n), bool)
    for agent in range(n):
        draw_start(0, agent, n, rng_states, *(batch[name] for name in _PER_AGENT), params.grid_length)
    state = {name: value[0] for name, value in batch.items()}
    return (
        state
        | {"timestep": np.int32(0).reshape(()), "runners_left": np.int32(params.num_runners).reshape(())}
        | reference_grid(params, state)
    )


def reference_step(params, state, action, rng_states=None):
    """One step of one env, agent by agent (the sequential ground truth), with the kernels' rules."""
    p = params
    action = np.asarray(action, np.int64)
    batch = one_env(state)
    loc_x, loc_y, speed, direction, acceleration, in_game = (batch[name][0] for name in _PER_AGENT)
    reward = np.zeros(p.num_agents, np.float32)
    for agent in range(p.num_agents):
        if not in_game[agent]:
            continue
        is_tagger = agent < p.num_taggers
        top_speed = p.max_speed * (p.skill_level_tagger if is_tagger else p.skill_level_runner)
        (loc_x[agent], loc_y[agent], speed[agent], direction[agent], acceleration[agent], crossed) = kinematics(
            np.float64(loc_x[agent]),
            np.float64(loc_y[agent]),
            np.float64(speed[agent]),
            np.float64(direction[agent]),
            np.float64(acceleration[agent]),
            int(action[agent, 0]),
            int(action[agent, 1]),
            top_speed,
            p.grid_length,
            p.min_acceleration,
            p.max_acceleration,
            p.num_acceleration_levels,
            p.min_turn,
            p.max_turn,
            p.num_turn_levels,
        )
        reward[agent] = move_reward(
            is_tagger, crossed, p.step_penalty_for_tagger, p.step_reward_for_runner, p.edge_hit_penalty
        )
    runners_left = int(state["runners_left"])
    for runner in range(p.num_taggers, p.num_agents):
        if not in_game[runner]:
            continue
        tagger = tagging_tagger(
            0, runner, batch["loc_x"], batch["loc_y"], p.num_taggers, p.tagging_distance, p.grid_length
        )
        if tagger < 0:
            continue
        reward[runner] = np.float64(reward[runner]) + p.tag_penalty_for_runner
        reward[tagger] = reward[tagger] + np.float32(p.tag_reward_for_tagger)  # float32, as the kernel
        if p.runner_exits_game_after_tagged:
            in_game[runner] = False
            runners_left -= 1
    timestep = int(state["timestep"]) + 1
    if timestep == p.episode_length:
        for runner in range(p.num_taggers, p.num_agents):
            if in_game[runner]:
                reward[runner] = np.float64(reward[runner]) + p.end_of_game_reward_for_runner
    new_state = {name: batch[name][0] for name in _PER_AGENT}
    new_state |= {"timestep": np.int32(timestep).reshape(()), "runners_left": np.int32(runners_left).reshape(())}
    return new_state | reference_grid(p, new_state), reward, runners_left == 0


def reference_grid(params, state):
    """The grid of one env's agents still in the game (what ``bin_agents`` leaves)."""
    batch = one_env({name: state[name] for name in ("loc_x", "loc_y", "in_game")})
    grid = {
        "cell_start": np.zeros((1, params.grid_side**2 + 2), np.int32),
        "cell_agents": np.zeros((1, params.num_agents), np.int32),
    }
    bin_env(
        0,
        params.num_agents,
        batch["loc_x"],
        batch["loc_y"],
        batch["in_game"],
        params.grid_length,
        grid["cell_start"],
        grid["cell_agents"],
    )
    return {name: value[0] for name, value in grid.items()}


def reference_observe(params, state):
    """Every agent's observation, shape ``(num_agents, 7 * (1 + K) + 1)`` (module docstring)."""
    p = params
    batch = one_env(state)
    obs = np.zeros((1, p.num_agents, FEATURES * (1 + p.num_observed) + 1), np.float32)
    no_grid = np.zeros((1, 0), np.int32)  # the reference searches all pairs
    for agent in range(p.num_agents):
        observe_agent(
            0,
            agent,
            p.num_agents,
            obs,
            *(batch[name] for name in _PER_AGENT),
            batch["timestep"],
            p.num_taggers,
            p.grid_length,
            p.episode_length,
            p.max_speed,
            p.use_full_observation,
            p.num_other_agents_observed,
            False,
            no_grid,
            no_grid,
        )
    return obs[0]


REFERENCE = CPUReference(reset=reference_reset, step=reference_step, observe=reference_observe)


def state_strategy(params):
    """Hypothesis strategy of consistent single-env states inside the square.

    ``timestep`` is drawn in ``[0, episode_length)``: a state at ``episode_length``
    ends its episode (the runtime truncates it), so no step can start from it.
    """
    from hypothesis import strategies as st

    n = params.num_agents

    def values(low, high):
        element = st.floats(float(np.float32(low)), float(np.float32(high)), width=32)
        return st.lists(element, min_size=n, max_size=n).map(lambda xs: np.array(xs, np.float32))

    def build(x, y, speed, direction, acceleration, out, t):
        top = params.max_speed * np.where(
            np.arange(n) < params.num_taggers, params.skill_level_tagger, params.skill_level_runner
        )
        in_game = np.concatenate([np.ones(params.num_taggers, bool), ~np.array(out, dtype=bool)])
        return {
            "loc_x": x,
            "loc_y": y,
            "speed": np.minimum(speed, top).astype(np.float32),
            "direction": direction,
            "acceleration": acceleration,
            "in_game": in_game,
            "timestep": np.int32(t).reshape(()),
            "runners_left": np.int32(in_game[params.num_taggers :].sum()).reshape(()),
            # scratch that every step rebuilds before reading it
            "cell_start": np.zeros(params.grid_side**2 + 2, np.int32),
            "cell_agents": np.full(n, -1, np.int32),
        }

    square = values(0.0, params.grid_length)
    outs = st.lists(st.booleans(), min_size=params.num_runners, max_size=params.num_runners)
    return st.builds(
        build,
        square,
        square,
        values(0.0, params.max_speed),
        values(0.0, 6.28),
        values(-params.max_speed, params.max_speed),
        outs.filter(lambda out: not all(out)),
        st.integers(0, params.episode_length - 1),
    )


def check_invariants(params, state):
    """Agents stay in the square, speeds within their caps, taggers never leave, counts and time agree."""
    grid = np.float32(params.grid_length)
    for axis in ("loc_x", "loc_y"):
        values = state[axis]
        assert np.all((values >= 0) & (values <= grid)), f"{axis} {values} outside [0, {params.grid_length}]"
    top = np.float32(params.max_speed * max(params.skill_level_tagger, params.skill_level_runner))
    assert np.all((state["speed"] >= 0) & (state["speed"] <= top)), f"speed {state['speed']} outside [0, {top}]"
    check_game_invariants(params, state)


# The state bounds set_state enforces (`StateArray.low`/``high``): positions and cells index the
# neighbour grid, agent numbers index the env's agents.
_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _grid_length(params):
    return params.grid_length


def _top_speed(params):
    return np.float32(params.max_speed * max(params.skill_level_tagger, params.skill_level_runner))


def _episode_length(params):
    return params.episode_length


def _num_runners(params):
    return params.num_runners


def _num_agents(params):
    return params.num_agents


def _last_agent(params):
    return params.num_agents - 1


def _observation_space(params):
    # relative speeds and accelerations scale with the skill levels: no tight finite bound
    size = FEATURES * (1 + params.num_observed) + 1
    return spaces.Box(low=-np.inf, high=np.inf, shape=(size,), dtype=np.float32)


def _action_space(params):
    return spaces.MultiDiscrete([params.num_acceleration_levels + 1, params.num_turn_levels + 1])


SPEC = EnvSpec(
    id="TagContinuous-v0",
    observation_space=_observation_space,
    action_space=_action_space,
    state=(
        StateArray("loc_x", np.float32, per_agent=True, low=0.0, high=_grid_length),
        StateArray("loc_y", np.float32, per_agent=True, low=0.0, high=_grid_length),
        StateArray("speed", np.float32, per_agent=True, low=0.0, high=_top_speed),
        StateArray("direction", np.float32, per_agent=True, low=0.0, high=TWO_PI),
        # no index: any finite value
        StateArray("acceleration", np.float32, per_agent=True, low=-_FLOAT32_MAX, high=_FLOAT32_MAX),
        StateArray("in_game", np.bool_, per_agent=True, initial=True),
        StateArray("timestep", np.int32, low=0, high=_episode_length),
        StateArray("runners_left", np.int32, low=0, high=_num_runners),
        # the neighbour grid (`bin_env`), rebuilt by every step and reset before it is read
        StateArray("cell_start", np.int32, shape=lambda params: (params.grid_side**2 + 2,), low=0, high=_num_agents),
        StateArray("cell_agents", np.int32, per_agent=True, low=-1, high=_last_agent),
    ),
    step_kernel=(move, tag, bin_agents, finish),
    reset_kernel=(start, bin_agents, first_observation),
    reference=REFERENCE,
    params=TagContinuousParams(),
    num_agents=lambda params: params.num_agents,
    max_episode_steps=lambda params: params.episode_length,
    # the env counts t for its observations and the end-of-game reward: set_state
    # starts the runtime's truncation counter from it
    episode_step="timestep",
    kernel_layout="agent",
    render="kernelgym.envs.render:render_tag_continuous",
    state_strategy=state_strategy,
    invariants=check_invariants,
    description="WarpDrive's continuous tag: taggers chase runners with speed and heading (multi-agent)",
)


@hookimpl
def kernelgym_register_envs():
    """Provide TagContinuous-v0."""
    return [SPEC]
