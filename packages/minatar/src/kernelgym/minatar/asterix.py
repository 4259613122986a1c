"""MinAtar Asterix: collect gold, dodge enemies.

The player moves in four directions within rows 1-8. Each of the eight rows 1-8 holds at
most one entity, an enemy or gold, that enters at the left or right edge and crosses the
row; touching gold gives +1 and removes it, touching an enemy ends the episode. Every
``spawn_speed`` frames an entity spawns: one uniform draw for its side (left if
``u < 1/2``), one for its kind (gold if ``u < 1/3``), then, if a row is free, a
``randint`` over the free rows, the original's order. Entities move one cell every
``move_speed`` frames. With difficulty ramping, every 100 frames spawns come one frame
sooner and, every other ramp, entities move one frame sooner.

Channels: 0 player, 1 enemy, 2 trail (the cell behind an entity), 3 gold.
Minimal action set: n, l, u, r, d.
"""

from __future__ import annotations

import numpy as np

from kernelgym.core import device_function, env_kernel, rng
from kernelgym.envs.hookspecs import hookimpl
from kernelgym.envs.spec import StateArray
from kernelgym.minatar._common import (
    DOWN,
    GRID,
    LEFT,
    NO_BOUND,
    NUM_ACTIONS,
    RIGHT,
    UP,
    action_mask,
    clear_observation,
    full_action,
    make_specs,
    reference_for,
    sticky,
)

__all__ = ["CHANNELS", "MINIMAL_ACTIONS", "SPECS", "play", "reset", "start", "step"]

CHANNELS = 4
MINIMAL_ACTIONS = (0, LEFT, UP, RIGHT, DOWN)
_MASK = action_mask(MINIMAL_ACTIONS)
SLOTS = 8  # entity k crosses row k + 1
RAMP_INTERVAL = 100
INIT_SPAWN_SPEED = 10
INIT_MOVE_INTERVAL = 5


@device_function
def _spawn(i, rng_states, ent_x, ent_on, ent_right, ent_gold):
    moves_right = rng.uniform(rng_states, i) < 1.0 / 2.0
    gold = rng.uniform(rng_states, i) < 1.0 / 3.0
    free = 0
    for slot in range(SLOTS):
        free += not ent_on[i, slot]
    if free == 0:
        return
    pick = rng.randint(rng_states, i, free)
    for slot in range(SLOTS):
        if not ent_on[i, slot]:
            if pick == 0:
                ent_on[i, slot] = True
                ent_x[i, slot] = 0 if moves_right else GRID - 1
                ent_right[i, slot] = moves_right
                ent_gold[i, slot] = gold
                return
            pick -= 1


@device_function
def _touch(i, slot, player_x, player_y, ent_x, ent_on, ent_gold):
    """(reward, terminal) of entity ``slot`` if it shares the player's cell (gold is taken)."""
    if ent_x[i, slot] == player_x[i] and slot + 1 == player_y[i]:
        if ent_gold[i, slot]:
            ent_on[i, slot] = False
            return 1, False
        return 0, True
    return 0, False


@device_function(inline="never")
def start(
    i,
    player_x,
    player_y,
    ent_x,
    ent_on,
    ent_right,
    ent_gold,
    spawn_speed,
    spawn_timer,
    move_speed,
    move_timer,
    ramp_timer,
    ramp_index,
):
    """A new episode for env ``i`` (no random draws); every state array is written, so that a reset
    state does not depend on the episode before."""
    player_x[i] = 5
    player_y[i] = 5
    for slot in range(SLOTS):
        ent_x[i, slot] = 0
        ent_on[i, slot] = False
        ent_right[i, slot] = False
        ent_gold[i, slot] = False
    spawn_speed[i] = INIT_SPAWN_SPEED
    spawn_timer[i] = INIT_SPAWN_SPEED
    move_speed[i] = INIT_MOVE_INTERVAL
    move_timer[i] = INIT_MOVE_INTERVAL
    ramp_timer[i] = RAMP_INTERVAL
    ramp_index[i] = 0


@device_function(inline="never")
def play(
    i,
    action,
    rng_states,
    player_x,
    player_y,
    ent_x,
    ent_on,
    ent_right,
    ent_gold,
    spawn_speed,
    spawn_timer,
    move_speed,
    move_timer,
    ramp_timer,
    ramp_index,
    difficulty_ramping,
):
    """Env ``i`` plays game action ``action``: returns (reward, terminal)."""
    reward = 0
    terminal = False
    if spawn_timer[i] == 0:
        _spawn(i, rng_states, ent_x, ent_on, ent_right, ent_gold)
        spawn_timer[i] = spawn_speed[i]
    if action == LEFT:
        player_x[i] = max(0, player_x[i] - 1)
    elif action == RIGHT:
        player_x[i] = min(GRID - 1, player_x[i] + 1)
    elif action == UP:
        player_y[i] = max(1, player_y[i] - 1)
    elif action == DOWN:
        player_y[i] = min(GRID - 2, player_y[i] + 1)
    for slot in range(SLOTS):
        if ent_on[i, slot]:
            gained, hit = _touch(i, slot, player_x, player_y, ent_x, ent_on, ent_gold)
            reward += gained
            terminal = terminal or hit
    if move_timer[i] == 0:
        move_timer[i] = move_speed[i]
        for slot in range(SLOTS):
            if ent_on[i, slot]:
                ent_x[i, slot] += 1 if ent_right[i, slot] else -1
                if ent_x[i, slot] < 0 or ent_x[i, slot] > GRID - 1:
                    ent_on[i, slot] = False
                else:
                    gained, hit = _touch(i, slot, player_x, player_y, ent_x, ent_on, ent_gold)
                    reward += gained
                    terminal = terminal or hit
    spawn_timer[i] -= 1
    move_timer[i] -= 1
    if difficulty_ramping and (spawn_speed[i] > 1 or move_speed[i] > 1):
        if ramp_timer[i] >= 0:
            ramp_timer[i] -= 1
        else:
            if move_speed[i] > 1 and ramp_index[i] % 2:
                move_speed[i] -= 1
            if spawn_speed[i] > 1:
                spawn_speed[i] -= 1
            ramp_index[i] += 1
            ramp_timer[i] = RAMP_INTERVAL
    return reward, terminal


@device_function
def observe(i, obs, player_x, player_y, ent_x, ent_on, ent_right, ent_gold):
    """The (10, 10, 4) bool observation of env ``i``."""
    clear_observation(i, obs)
    obs[i, player_y[i], player_x[i], 0] = True
    for slot in range(SLOTS):
        if ent_on[i, slot]:
            x = ent_x[i, slot]
            obs[i, slot + 1, x, 3 if ent_gold[i, slot] else 1] = True
            back = x - 1 if ent_right[i, slot] else x + 1
            if 0 <= back <= GRID - 1:
                obs[i, slot + 1, back, 2] = True


@env_kernel
def step(
    i,
    actions,
    rng_states,
    obs,
    rewards,
    terminated,
    last_action,
    player_x,
    player_y,
    ent_x,
    ent_on,
    ent_right,
    ent_gold,
    spawn_speed,
    spawn_timer,
    move_speed,
    move_timer,
    ramp_timer,
    ramp_index,
    sticky_action_prob,
    difficulty_ramping,
    minimal_action_set,
):
    """One Asterix step of env ``i``."""
    action = sticky(
        rng_states, i, full_action(actions[i], minimal_action_set, _MASK), last_action[i], sticky_action_prob
    )
    last_action[i] = action
    reward, terminal = play(
        i,
        action,
        rng_states,
        player_x,
        player_y,
        ent_x,
        ent_on,
        ent_right,
        ent_gold,
        spawn_speed,
        spawn_timer,
        move_speed,
        move_timer,
        ramp_timer,
        ramp_index,
        difficulty_ramping,
    )
    rewards[i] = reward
    terminated[i] = terminal
    observe(i, obs, player_x, player_y, ent_x, ent_on, ent_right, ent_gold)


@env_kernel
def reset(
    i,
    obs,
    player_x,
    player_y,
    ent_x,
    ent_on,
    ent_right,
    ent_gold,
    spawn_speed,
    spawn_timer,
    move_speed,
    move_timer,
    ramp_timer,
    ramp_index,
):
    """A new Asterix episode for env ``i``."""
    start(
        i,
        player_x,
        player_y,
        ent_x,
        ent_on,
        ent_right,
        ent_gold,
        spawn_speed,
        spawn_timer,
        move_speed,
        move_timer,
        ramp_timer,
        ramp_index,
    )
    observe(i, obs, player_x, player_y, ent_x, ent_on, ent_right, ent_gold)


STATE = (
    StateArray("last_action", np.int32, restore_on_reset=True, low=0, high=NUM_ACTIONS - 1),
    StateArray("player_x", np.int32, low=0, high=GRID - 1),
    StateArray("player_y", np.int32, low=1, high=GRID - 2),
    # one column past either edge: an entity that just left (and is off) keeps its x
    StateArray("ent_x", np.int32, shape=(SLOTS,), low=-1, high=GRID),
    StateArray("ent_on", np.bool_, shape=(SLOTS,)),
    StateArray("ent_right", np.bool_, shape=(SLOTS,)),
    StateArray("ent_gold", np.bool_, shape=(SLOTS,)),
    StateArray("spawn_speed", np.int32, low=1, high=INIT_SPAWN_SPEED),
    StateArray("spawn_timer", np.int32, low=0, high=INIT_SPAWN_SPEED),
    StateArray("move_speed", np.int32, low=1, high=INIT_MOVE_INTERVAL),
    StateArray("move_timer", np.int32, low=0, high=INIT_MOVE_INTERVAL),
    StateArray("ramp_timer", np.int32, low=-1, high=RAMP_INTERVAL),
    StateArray("ramp_index", np.int32, low=0, high=NO_BOUND),
)

REFERENCE = reference_for(STATE, step, reset, observe, CHANNELS)


def check_invariants(params, state):
    """The player stays in rows 1-8, entities on the grid, speeds within their start values."""
    assert 0 <= int(state["player_x"]) < GRID and 1 <= int(state["player_y"]) <= GRID - 2, (
        f"player ({int(state['player_x'])}, {int(state['player_y'])}) off its area"
    )
    on = state["ent_on"]
    assert np.all((state["ent_x"][on] >= 0) & (state["ent_x"][on] < GRID)), f"ent_x {state['ent_x']} off the grid"
    assert 1 <= int(state["spawn_speed"]) <= INIT_SPAWN_SPEED, f"spawn_speed {int(state['spawn_speed'])}"
    assert 1 <= int(state["move_speed"]) <= INIT_MOVE_INTERVAL, f"move_speed {int(state['move_speed'])}"


SPECS = make_specs(
    "Asterix",
    CHANNELS,
    MINIMAL_ACTIONS,
    state=STATE,
    step_kernel=step,
    reset_kernel=reset,
    reference=REFERENCE,
    invariants=check_invariants,
    render="kernelgym.minatar.render:render_asterix",
    description="Collect gold and dodge enemies",
)


@hookimpl
def kernelgym_register_envs():
    """Provide MinAtar-Asterix-v1 and MinAtar-Asterix-v0."""
    return list(SPECS)
