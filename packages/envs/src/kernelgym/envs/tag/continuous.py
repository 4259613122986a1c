"""TagContinuous: WarpDrive's continuous game of tag, with speeds, headings and turns.

Agents ``0 .. num_taggers - 1`` are taggers, the rest runners. Each agent has a
position in the square ``[0, grid_length]^2``, a speed, a direction and an
acceleration. Reset puts every agent at a uniform random position with a direction
drawn from {0, pi/2, pi, 3 pi/2}, speed and acceleration 0 (RNG: stream ``env`` of
``kernelgym.core.rng``, drawn by one thread per env).

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
"""

from __future__ import annotations

import dataclasses
import math

import numba
import numpy as np
from gymnasium import spaces

from kernelgym.core import agent_kernel, atomic_add, device_function, rng
from kernelgym.envs.hookspecs import hookimpl
from kernelgym.envs.spec import CPUReference, EnvSpec, StateArray
from kernelgym.envs.tag._common import (
    RESET_INPUTS,
    STEP_INPUTS,
    PhasedKernel,
    check_game_invariants,
    kernel_arguments,
)

TWO_PI = 2.0 * math.pi
FEATURES = 7  # values per agent block in the observation


@dataclasses.dataclass(frozen=True)
class TagContinuousParams:
    """WarpDrive's parameters and defaults; their order is the kernels' argument order."""

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
            ("num_other_agents_observed",
             self.use_full_observation
             or 1 <= self.num_other_agents_observed <= self.num_taggers + self.num_runners - 1,
             "in [1, num_agents - 1]"),
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
    def num_observed(self) -> int:
        """How many other agents each observation describes."""
        return self.num_agents - 1 if self.use_full_observation else self.num_other_agents_observed


# --------------------------------------------------------------- per-agent pieces
# Float32 array values are widened with np.float64() before any arithmetic: numba
# widens them anyway, but the simulator runs this code as Python, where NumPy would
# compute float32 op Python-float in float32 and the backends would drift apart.
@numba.njit(inline="always")
def action_level(index, num_levels, low, high):
    """Index 0 is the no-op 0.0; indices 1..num_levels are evenly spaced over [low, high]."""
    if index == 0:
        return 0.0
    if num_levels == 1:
        return low
    return low + (high - low) * (index - 1) / (num_levels - 1)


@device_function
def _reset_env(env, num_agents, rng_states, loc_x, loc_y, speed, direction, acceleration, in_game,
               timestep, runners_left, num_runners, grid_length):
    # one thread draws for the whole env, agent by agent, so the draws are reproducible
    for agent in range(num_agents):
        loc_x[env, agent] = rng.uniform_range(rng_states, env, 0.0, grid_length)
        loc_y[env, agent] = rng.uniform_range(rng_states, env, 0.0, grid_length)
        direction[env, agent] = rng.randint(rng_states, env, 4) * (math.pi / 2.0)
        speed[env, agent] = 0.0
        acceleration[env, agent] = 0.0
        in_game[env, agent] = True
    timestep[env] = 0
    runners_left[env] = num_runners


@device_function
def _write_block(env, agent, block, obs, other, loc_x, loc_y, speed, direction, acceleration, in_game,
                 num_taggers, grid_length, max_speed):
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


@device_function
def _squared_distance(env, a, b, loc_x, loc_y):
    dx = np.float64(loc_x[env, a]) - loc_x[env, b]
    dy = np.float64(loc_y[env, a]) - loc_y[env, b]
    return dx * dx + dy * dy


@device_function
def _observe_agent(env, agent, num_agents, obs, loc_x, loc_y, speed, direction, acceleration, in_game, timestep,
                   num_taggers, grid_length, episode_length, max_speed, use_full_observation,
                   num_other_agents_observed):
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
                _write_block(env, agent, block, obs, other, loc_x, loc_y, speed, direction, acceleration, in_game,
                             num_taggers, grid_length, max_speed)
                block += 1
    else:
        num_blocks = num_other_agents_observed
        # k-nearest by repeated selection: the next agent after (last_distance, last_index)
        # in (distance, index) order; O(k * num_agents), no scratch memory on the device
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
                _write_block(env, agent, block, obs, best, loc_x, loc_y, speed, direction, acceleration, in_game,
                             num_taggers, grid_length, max_speed)
                last_distance = best_distance
                last_index = best
    obs[env, agent, FEATURES * (num_blocks + 1)] = timestep[env] / episode_length


# ------------------------------------------------------------------ step phases
@agent_kernel
def _step_reset(env, agent, num_agents, rng_states, reset_mask, rewards,
                loc_x, loc_y, speed, direction, acceleration, in_game, timestep, runners_left,
                num_runners, grid_length):
    """Phase 0: reset the envs whose previous step ended the episode (NEXT_STEP autoreset)."""
    if reset_mask[env]:
        rewards[env, agent] = 0.0
        if agent == 0:
            _reset_env(env, num_agents, rng_states, loc_x, loc_y, speed, direction, acceleration, in_game,
                       timestep, runners_left, num_runners, grid_length)


@agent_kernel
def _step_move(env, agent, num_agents, actions, reset_mask, rewards,
               loc_x, loc_y, speed, direction, acceleration, in_game, timestep,
               num_taggers, grid_length, max_speed, skill_level_tagger, skill_level_runner,
               max_acceleration, min_acceleration, max_turn, min_turn, num_acceleration_levels, num_turn_levels,
               edge_hit_penalty, step_penalty_for_tagger, step_reward_for_runner):
    """Phase 1: every agent still in the game turns, accelerates and moves."""
    if reset_mask[env]:
        return
    if agent == 0:
        timestep[env] += 1
    rewards[env, agent] = 0.0
    if not in_game[env, agent]:
        return
    is_tagger = agent < num_taggers
    top_speed = max_speed * (skill_level_tagger if is_tagger else skill_level_runner)
    turn = action_level(actions[env, agent, 1], num_turn_levels, min_turn, max_turn)
    heading = (np.float64(direction[env, agent]) + turn) % TWO_PI
    accel = np.float64(acceleration[env, agent]) + action_level(
        actions[env, agent, 0], num_acceleration_levels, min_acceleration, max_acceleration
    )
    new_speed = min(max(np.float64(speed[env, agent]) + accel, 0.0), top_speed)
    if new_speed <= 0.0 or new_speed >= top_speed:
        accel = 0.0
    x = np.float64(loc_x[env, agent]) + new_speed * math.cos(heading)
    y = np.float64(loc_y[env, agent]) + new_speed * math.sin(heading)
    reward = step_penalty_for_tagger if is_tagger else step_reward_for_runner
    if x < 0.0 or x > grid_length or y < 0.0 or y > grid_length:
        reward += edge_hit_penalty
    loc_x[env, agent] = min(max(x, 0.0), grid_length)
    loc_y[env, agent] = min(max(y, 0.0), grid_length)
    direction[env, agent] = heading
    speed[env, agent] = new_speed
    acceleration[env, agent] = accel
    rewards[env, agent] = reward


@agent_kernel
def _step_tag(env, agent, num_agents, reset_mask, rewards, loc_x, loc_y, in_game, runners_left,
              num_taggers, grid_length, tagging_distance, tag_reward_for_tagger, tag_penalty_for_runner,
              runner_exits_game_after_tagged):
    """Phase 2: each runner still in the game checks its nearest tagger."""
    if reset_mask[env] or agent < num_taggers or not in_game[env, agent]:
        return
    nearest = 0
    nearest_distance = _squared_distance(env, agent, 0, loc_x, loc_y)
    for tagger in range(1, num_taggers):
        distance = _squared_distance(env, agent, tagger, loc_x, loc_y)
        if distance < nearest_distance:
            nearest = tagger
            nearest_distance = distance
    margin = tagging_distance * grid_length
    if nearest_distance < margin * margin:
        rewards[env, agent] += tag_penalty_for_runner
        # one tagger may tag several runners in a step: its reward is shared
        atomic_add(rewards, (env, nearest), tag_reward_for_tagger)
        if runner_exits_game_after_tagged:
            in_game[env, agent] = False
            atomic_add(runners_left, env, -1)


@agent_kernel
def _step_finish(env, agent, num_agents, reset_mask, obs, rewards, terminated,
                 loc_x, loc_y, speed, direction, acceleration, in_game, timestep, runners_left,
                 num_taggers, grid_length, episode_length, max_speed, use_full_observation,
                 num_other_agents_observed, end_of_game_reward_for_runner):
    """Phase 3: the end-of-game reward, observations and the terminated flag."""
    if not reset_mask[env] and agent >= num_taggers and in_game[env, agent] and timestep[env] == episode_length:
        rewards[env, agent] += end_of_game_reward_for_runner
    _observe_agent(env, agent, num_agents, obs, loc_x, loc_y, speed, direction, acceleration, in_game, timestep,
                   num_taggers, grid_length, episode_length, max_speed, use_full_observation,
                   num_other_agents_observed)
    if agent == 0:
        terminated[env] = runners_left[env] == 0 and not reset_mask[env]


# ----------------------------------------------------------------- reset phases
@agent_kernel
def _reset_start(env, agent, num_agents, rng_states, reset_mask,
                 loc_x, loc_y, speed, direction, acceleration, in_game, timestep, runners_left,
                 num_runners, grid_length):
    """Draw the start state of every flagged env (one thread per env draws)."""
    if reset_mask[env] and agent == 0:
        _reset_env(env, num_agents, rng_states, loc_x, loc_y, speed, direction, acceleration, in_game,
                   timestep, runners_left, num_runners, grid_length)


@agent_kernel
def _reset_observe(env, agent, num_agents, reset_mask, obs,
                   loc_x, loc_y, speed, direction, acceleration, in_game, timestep,
                   num_taggers, grid_length, episode_length, max_speed, use_full_observation,
                   num_other_agents_observed):
    """The first observation of every agent of a flagged env."""
    if reset_mask[env]:
        _observe_agent(env, agent, num_agents, obs, loc_x, loc_y, speed, direction, acceleration, in_game,
                       timestep, num_taggers, grid_length, episode_length, max_speed, use_full_observation,
                       num_other_agents_observed)


# ---------------------------------------------------------------- CPU reference
def reference_reset(params, generator):
    """A start state of one env drawn with a numpy Generator (same distribution as the kernel)."""
    n = params.num_agents
    return {
        "loc_x": generator.uniform(0, params.grid_length, n).astype(np.float32),
        "loc_y": generator.uniform(0, params.grid_length, n).astype(np.float32),
        "speed": np.zeros(n, np.float32),
        "direction": (generator.integers(0, 4, n) * (np.pi / 2)).astype(np.float32),
        "acceleration": np.zeros(n, np.float32),
        "in_game": np.ones(n, bool),
        "timestep": np.int32(0).reshape(()),
        "runners_left": np.int32(params.num_runners).reshape(()),
    }


def _levels(index, num_levels, low, high):
    index = np.asarray(index, np.float64)
    spaced = low + (high - low) * (index - 1) / max(num_levels - 1, 1)
    return np.where(index == 0, 0.0, spaced)


def reference_step(params, state, action, generator=None):
    """One step of one env in plain numpy, runner by runner for the tags (the ground truth)."""
    action = np.asarray(action, np.int64)
    n, taggers = params.num_agents, np.arange(params.num_agents) < params.num_taggers
    in_game = state["in_game"].copy()
    top_speed = params.max_speed * np.where(taggers, params.skill_level_tagger, params.skill_level_runner)
    direction = (state["direction"].astype(np.float64)
                 + _levels(action[:, 1], params.num_turn_levels, params.min_turn, params.max_turn)) % (2 * np.pi)
    acceleration = state["acceleration"] + _levels(
        action[:, 0], params.num_acceleration_levels, params.min_acceleration, params.max_acceleration)
    speed = np.minimum(np.maximum(state["speed"] + acceleration, 0.0), top_speed)
    acceleration = np.where((speed <= 0) | (speed >= top_speed), 0.0, acceleration)
    # math.cos/sin (libm, as the kernels use) rather than numpy's SIMD versions, whose last
    # bit may differ: the reference must reproduce the kernels bit for bit
    x = state["loc_x"] + speed * np.array([math.cos(heading) for heading in direction])
    y = state["loc_y"] + speed * np.array([math.sin(heading) for heading in direction])
    crossed = (x < 0) | (x > params.grid_length) | (y < 0) | (y > params.grid_length)
    reward = np.where(taggers, params.step_penalty_for_tagger, params.step_reward_for_runner)
    reward = reward + np.where(crossed, params.edge_hit_penalty, 0.0)
    moved = {
        "loc_x": np.clip(x, 0, params.grid_length), "loc_y": np.clip(y, 0, params.grid_length),
        "speed": speed, "direction": direction, "acceleration": acceleration,
    }
    new_state = {
        name: np.where(in_game, value, state[name]).astype(np.float32) for name, value in moved.items()
    }
    reward = np.where(in_game, reward, 0.0)
    runners_left = int(state["runners_left"])
    px, py = new_state["loc_x"].astype(np.float64), new_state["loc_y"].astype(np.float64)
    margin = params.tagging_distance * params.grid_length
    for runner in range(params.num_taggers, n):
        if not in_game[runner]:
            continue
        distances = (px[: params.num_taggers] - px[runner]) ** 2 + (py[: params.num_taggers] - py[runner]) ** 2
        nearest = int(np.argmin(distances))  # the first of equal distances, as the kernel
        if distances[nearest] < margin * margin:
            reward[runner] += params.tag_penalty_for_runner
            reward[nearest] += params.tag_reward_for_tagger
            if params.runner_exits_game_after_tagged:
                in_game[runner] = False
                runners_left -= 1
    timestep = int(state["timestep"]) + 1
    if timestep == params.episode_length:
        reward[~taggers & in_game] += params.end_of_game_reward_for_runner
    new_state |= {
        "in_game": in_game,
        "timestep": np.int32(timestep).reshape(()),
        "runners_left": np.int32(runners_left).reshape(()),
    }
    return new_state, reward.astype(np.float32), runners_left == 0


def reference_observe(params, state):
    """Every agent's observation, shape ``(num_agents, 7 * (1 + K) + 1)`` (module docstring)."""
    n = params.num_agents
    features = np.stack([
        state["loc_x"], state["loc_y"], state["speed"], state["direction"], state["acceleration"],
    ]).astype(np.float64)
    own_scale = np.array([params.grid_length, params.grid_length, params.max_speed, 2 * np.pi, params.max_speed])
    diagonal = params.grid_length * np.sqrt(2.0)
    relative_scale = np.array([diagonal, diagonal, params.max_speed, 2 * np.pi, params.max_speed])
    types = (np.arange(n) < params.num_taggers).astype(np.float64)
    in_game = state["in_game"].astype(np.float64)
    rows = []
    for agent in range(n):
        if params.use_full_observation:
            observed = [other for other in range(n) if other != agent]
        else:
            distances = (features[0] - features[0, agent]) ** 2 + (features[1] - features[1, agent]) ** 2
            candidates = [other for other in range(n) if other != agent and state["in_game"][other]]
            observed = sorted(candidates, key=lambda other: (distances[other], other))[
                : params.num_other_agents_observed]
        blocks = [np.concatenate([features[:, agent] / own_scale, [types[agent], in_game[agent]]])]
        for other in observed:
            relative = (features[:, other] - features[:, agent]) / relative_scale
            blocks.append(np.concatenate([relative, [types[other], in_game[other]]]))
        blocks += [np.zeros(FEATURES)] * (params.num_observed - len(observed))
        blocks.append([int(state["timestep"]) / params.episode_length])
        rows.append(np.concatenate(blocks))
    return np.array(rows, dtype=np.float32)


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
        top = params.max_speed * np.where(np.arange(n) < params.num_taggers,
                                          params.skill_level_tagger, params.skill_level_runner)
        in_game = np.concatenate([np.ones(params.num_taggers, bool), ~np.array(out, dtype=bool)])
        return {
            "loc_x": x, "loc_y": y,
            "speed": np.minimum(speed, top).astype(np.float32),
            "direction": direction, "acceleration": acceleration, "in_game": in_game,
            "timestep": np.int32(t).reshape(()),
            "runners_left": np.int32(in_game[params.num_taggers:].sum()).reshape(()),
        }

    square = values(0.0, params.grid_length)
    outs = st.lists(st.booleans(), min_size=params.num_runners, max_size=params.num_runners)
    return st.builds(
        build, square, square, values(0.0, params.max_speed), values(0.0, 6.28),
        values(-params.max_speed, params.max_speed), outs.filter(lambda out: not all(out)),
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
        StateArray("loc_x", np.float32, per_agent=True),
        StateArray("loc_y", np.float32, per_agent=True),
        StateArray("speed", np.float32, per_agent=True),
        StateArray("direction", np.float32, per_agent=True),
        StateArray("acceleration", np.float32, per_agent=True),
        StateArray("in_game", np.bool_, per_agent=True, initial=True),
        StateArray("timestep", np.int32),
        StateArray("runners_left", np.int32),
    ),
    step_kernel=f"{__name__}:step_kernel",
    reset_kernel=f"{__name__}:reset_kernel",
    reference=f"{__name__}:REFERENCE",
    params=TagContinuousParams(),
    num_agents=lambda params: params.num_agents,
    max_episode_steps=lambda params: params.episode_length,
    # the env counts t for its observations and the end-of-game reward: set_state
    # starts the runtime's truncation counter from it
    episode_step="timestep",
    kernel_layout="agent",
    render="kernelgym.envs.render:render_tag_continuous",
    state_strategy=f"{__name__}:state_strategy",
    invariants=f"{__name__}:check_invariants",
    description="WarpDrive's continuous tag: taggers chase runners with speed and heading (multi-agent)",
)


step_kernel = PhasedKernel(kernel_arguments(STEP_INPUTS, SPEC), _step_reset, _step_move, _step_tag, _step_finish)
reset_kernel = PhasedKernel(kernel_arguments(RESET_INPUTS, SPEC), _reset_start, _reset_observe)


@hookimpl
def kernelgym_register_envs():
    """Provide TagContinuous-v0."""
    return [SPEC]
