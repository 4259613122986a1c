"""MinAtar Seaquest: a submarine rescues divers, shoots enemies and surfaces for oxygen.

The submarine moves in rows 0-8 (row 0 is the surface) and fires bullets (every 5 frames
at most) the way it faces. Enemy fish and submarines cross rows 1-8 (shooting one gives
+1); enemy submarines fire every 11 frames. Divers cross the rows too and are picked up
(at most 6). Under water the oxygen runs down; surfacing with at least one diver refills
it (with all 6 divers it also pays ``oxygen * 10 // 200`` and the divers leave), while
surfacing with none, running out of oxygen or touching an enemy or an enemy bullet ends
the episode. Each surfacing with difficulty ramping makes enemies spawn sooner and, every
other time, move sooner. Spawns draw, in the original's order: an enemy (every
``e_spawn_speed`` frames) a uniform for its side, one for its kind (a submarine if
``u < 1/3``) and a row ``randint(1, 9)``; a diver (every 30 frames) a side and a row.

Channels: 0 sub front, 1 sub back, 2 friendly bullet, 3 trail, 4 enemy bullet, 5 enemy
fish, 6 enemy sub, 7 oxygen gauge, 8 diver gauge, 9 diver. Minimal action set: all six.

The original keeps its objects in Python lists and removes them while iterating over
them in reverse; some removals go by equality (``list.remove``). The kernels keep each
list as an ordered table of rows with a count, and emulate those semantics exactly: a
reverse iteration visits index ``k`` while ``k < count``, and a removal deletes the
first row equal in every field, shifting the rows after it (`_remove_first_equal`).
Tables have fixed capacities that the rules cannot exceed (see `CAPACITY`).
"""

from __future__ import annotations

import numpy as np

from kernelgym.core import device_function, env_kernel, rng
from kernelgym.envs.hookspecs import hookimpl
from kernelgym.envs.spec import StateArray
from kernelgym.minatar._common import (
    DOWN,
    FIRE,
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

__all__ = ["CAPACITY", "CHANNELS", "MINIMAL_ACTIONS", "SPECS", "play", "reset", "start", "step"]

CHANNELS = 10
MINIMAL_ACTIONS = (0, LEFT, UP, RIGHT, DOWN, FIRE)
_MASK = action_mask(MINIMAL_ACTIONS)
RAMP_INTERVAL = 100
MAX_OXYGEN = 200
INIT_SPAWN_SPEED = 20
DIVER_SPAWN_SPEED = 30
INIT_MOVE_INTERVAL = 5
SHOT_COOL_DOWN = 5
ENEMY_SHOT_INTERVAL = 10
DIVER_MOVE_INTERVAL = 5
MAX_DIVERS = 6

# Row fields: X, Y, RIGHT (moves right), TIMER (frames to the next move), SHOT (a sub's
# frames to its next shot). Bullets have no timer.
X, Y, RIGHTWARD, TIMER, SHOT = range(5)
# Capacities, from the rules: one friendly shot per 6 frames lives <= 11 frames; one
# enemy spawn per frame at most, living <= 10 moves of <= 6 frames (+1), so <= 62 fish
# and subs; a sub fires once per 11 frames and a bullet lives <= 11 frames, so enemy
# bullets stay below subs alive during 11 frames (<= 62 + 11); one diver per 30 frames
# living <= 61 frames.
CAPACITY = {"f_bullets": 4, "e_bullets": 80, "fish": 64, "subs": 64, "divers": 4}
F_BULLETS, E_BULLETS, FISH, SUBS, DIVERS = range(len(CAPACITY))  # their rows in ``counts``


# ------------------------------------------------------------------ list emulation
@device_function(inline="never")
def _remove_at(i, table, counts, which, index):
    for row in range(index, counts[i, which] - 1):
        for field in range(table.shape[2]):
            table[i, row, field] = table[i, row + 1, field]
    counts[i, which] -= 1


@device_function(inline="never")
def _remove_first_equal(i, table, counts, which, index):
    """``list.remove(table[index])``: delete the first row equal to row ``index``; returns its index."""
    for row in range(index + 1):
        same = True
        for field in range(table.shape[2]):
            if table[i, row, field] != table[i, index, field]:
                same = False
        if same:
            _remove_at(i, table, counts, which, row)
            return row
    return index  # unreachable: row ``index`` equals itself


@device_function(inline="never")
def _append(i, table, counts, which, x, y, rightward, timer, shot):
    row = counts[i, which]
    if row >= table.shape[1]:
        return  # unreachable within CAPACITY (see there)
    table[i, row, X] = x
    table[i, row, Y] = y
    table[i, row, RIGHTWARD] = rightward
    if table.shape[2] > TIMER:
        table[i, row, TIMER] = timer
    if table.shape[2] > SHOT:
        table[i, row, SHOT] = shot
    counts[i, which] = row + 1


@device_function(inline="never")
def _first_at(i, table, counts, which, x, y):
    """The index of the first row at cell (x, y), or -1."""
    for row in range(counts[i, which]):
        if table[i, row, X] == x and table[i, row, Y] == y:
            return row
    return -1


@device_function
def _step_x(i, table, row):
    table[i, row, X] += 1 if table[i, row, RIGHTWARD] else -1
    return table[i, row, X] < 0 or table[i, row, X] > GRID - 1


# ------------------------------------------------------------------ the rules
@device_function(inline="never")
def _spawn_enemy(i, rng_states, fish, subs, counts, move_speed):
    rightward = rng.uniform(rng_states, i) < 1.0 / 2.0
    is_sub = rng.uniform(rng_states, i) < 1.0 / 3.0
    y = 1 + rng.randint(rng_states, i, 8)
    # no spawn into a row where an enemy moves the other way
    for row in range(counts[i, SUBS]):
        if subs[i, row, Y] == y and subs[i, row, RIGHTWARD] != rightward:
            return
    for row in range(counts[i, FISH]):
        if fish[i, row, Y] == y and fish[i, row, RIGHTWARD] != rightward:
            return
    x = 0 if rightward else GRID - 1
    if is_sub:
        _append(i, subs, counts, SUBS, x, y, rightward, move_speed[i], ENEMY_SHOT_INTERVAL)
    else:
        _append(i, fish, counts, FISH, x, y, rightward, move_speed[i], 0)


@device_function(inline="never")
def _spawn_diver(i, rng_states, divers, counts):
    rightward = rng.uniform(rng_states, i) < 1.0 / 2.0
    y = 1 + rng.randint(rng_states, i, 8)
    _append(i, divers, counts, DIVERS, 0 if rightward else GRID - 1, y, rightward, DIVER_MOVE_INTERVAL, 0)


@device_function(inline="never")
def _move_enemies(i, table, which, f_bullets, e_bullets, counts, sub_x, sub_y, move_speed, shoots):
    """The original's enemy-sub loop (``shoots``) or enemy-fish loop: returns (reward, terminal)."""
    reward = 0
    terminal = False
    k = counts[i, which] - 1
    while 0 <= k < counts[i, which]:
        current = k  # where this object is now (removals before it shift it)
        removed = False
        if table[i, current, X] == sub_x[i] and table[i, current, Y] == sub_y[i]:
            terminal = True
        if table[i, current, TIMER] == 0:
            table[i, current, TIMER] = move_speed[i]
            if _step_x(i, table, current):
                removed = _remove_first_equal(i, table, counts, which, current) == current
                current -= not removed
            elif table[i, current, X] == sub_x[i] and table[i, current, Y] == sub_y[i]:
                terminal = True
            else:
                hit = _first_at(i, f_bullets, counts, F_BULLETS, table[i, current, X], table[i, current, Y])
                if hit >= 0:
                    x, y, rightward = table[i, current, X], table[i, current, Y], table[i, current, RIGHTWARD]
                    shot = table[i, current, SHOT] if shoots else 0
                    removed = _remove_first_equal(i, table, counts, which, current) == current
                    current -= not removed
                    _remove_at(i, f_bullets, counts, F_BULLETS, hit)
                    reward += 1
                    if removed and shoots:
                        # a destroyed sub still fires this frame (the original keeps using it)
                        if shot == 0:
                            _append(i, e_bullets, counts, E_BULLETS, x, y, rightward, 0, 0)
                        k -= 1
                        continue
        else:
            table[i, current, TIMER] -= 1
        if shoots:
            if removed:
                # only a sub that left the grid gets here: a bullet fired off the grid
                # leaves it on its first move, within this frame, so none is added
                k -= 1
                continue
            if table[i, current, SHOT] == 0:
                table[i, current, SHOT] = ENEMY_SHOT_INTERVAL
                _append(
                    i,
                    e_bullets,
                    counts,
                    E_BULLETS,
                    table[i, current, X],
                    table[i, current, Y],
                    table[i, current, RIGHTWARD],
                    0,
                    0,
                )
            else:
                table[i, current, SHOT] -= 1
        k -= 1
    return reward, terminal


@device_function(inline="never")
def _clear(i, table):
    for row in range(table.shape[1]):
        for field in range(table.shape[2]):
            table[i, row, field] = 0


@device_function(inline="never")
def start(
    i,
    oxygen,
    diver_count,
    sub_x,
    sub_y,
    sub_right,
    f_bullets,
    e_bullets,
    fish,
    subs,
    divers,
    counts,
    e_spawn_speed,
    e_spawn_timer,
    d_spawn_timer,
    move_speed,
    ramp_index,
    shot_timer,
    surface,
):
    """A new episode for env ``i`` (no random draws); every state array is written (the tables'
    unused rows too), so that a reset state does not depend on the episode before."""
    _clear(i, f_bullets)
    _clear(i, e_bullets)
    _clear(i, fish)
    _clear(i, subs)
    _clear(i, divers)
    oxygen[i] = MAX_OXYGEN
    diver_count[i] = 0
    sub_x[i] = 5
    sub_y[i] = 0
    sub_right[i] = False
    counts[i, F_BULLETS] = 0
    counts[i, E_BULLETS] = 0
    counts[i, FISH] = 0
    counts[i, SUBS] = 0
    counts[i, DIVERS] = 0
    e_spawn_speed[i] = INIT_SPAWN_SPEED
    e_spawn_timer[i] = INIT_SPAWN_SPEED
    d_spawn_timer[i] = DIVER_SPAWN_SPEED
    move_speed[i] = INIT_MOVE_INTERVAL
    ramp_index[i] = 0
    shot_timer[i] = 0
    surface[i] = True


@device_function(inline="never")
def play(
    i,
    action,
    rng_states,
    oxygen,
    diver_count,
    sub_x,
    sub_y,
    sub_right,
    f_bullets,
    e_bullets,
    fish,
    subs,
    divers,
    counts,
    e_spawn_speed,
    e_spawn_timer,
    d_spawn_timer,
    move_speed,
    ramp_index,
    shot_timer,
    surface,
    difficulty_ramping,
):
    """Env ``i`` plays game action ``action``: returns (reward, terminal)."""
    reward = 0
    terminal = False
    if e_spawn_timer[i] == 0:
        _spawn_enemy(i, rng_states, fish, subs, counts, move_speed)
        e_spawn_timer[i] = e_spawn_speed[i]
    if d_spawn_timer[i] == 0:
        _spawn_diver(i, rng_states, divers, counts)
        d_spawn_timer[i] = DIVER_SPAWN_SPEED
    if action == FIRE and shot_timer[i] == 0:
        _append(i, f_bullets, counts, F_BULLETS, sub_x[i], sub_y[i], sub_right[i], 0, 0)
        shot_timer[i] = SHOT_COOL_DOWN
    elif action == LEFT:
        sub_x[i] = max(0, sub_x[i] - 1)
        sub_right[i] = False
    elif action == RIGHT:
        sub_x[i] = min(GRID - 1, sub_x[i] + 1)
        sub_right[i] = True
    elif action == UP:
        sub_y[i] = max(0, sub_y[i] - 1)
    elif action == DOWN:
        sub_y[i] = min(GRID - 2, sub_y[i] + 1)

    # friendly bullets: move, then hit the first fish, else the first sub, on their cell
    k = counts[i, F_BULLETS] - 1
    while 0 <= k < counts[i, F_BULLETS]:
        if _step_x(i, f_bullets, k):
            _remove_first_equal(i, f_bullets, counts, F_BULLETS, k)
        else:
            x, y = f_bullets[i, k, X], f_bullets[i, k, Y]
            hit = _first_at(i, fish, counts, FISH, x, y)
            if hit >= 0:
                _remove_at(i, fish, counts, FISH, hit)
                _remove_first_equal(i, f_bullets, counts, F_BULLETS, k)
                reward += 1
            else:
                hit = _first_at(i, subs, counts, SUBS, x, y)
                if hit >= 0:
                    _remove_at(i, subs, counts, SUBS, hit)
                    _remove_first_equal(i, f_bullets, counts, F_BULLETS, k)
                    reward += 1
        k -= 1

    # divers: picked up on the submarine's cell (while it holds fewer than 6), else move
    k = counts[i, DIVERS] - 1
    while 0 <= k < counts[i, DIVERS]:
        if divers[i, k, X] == sub_x[i] and divers[i, k, Y] == sub_y[i] and diver_count[i] < MAX_DIVERS:
            _remove_first_equal(i, divers, counts, DIVERS, k)
            diver_count[i] += 1
        elif divers[i, k, TIMER] == 0:
            divers[i, k, TIMER] = DIVER_MOVE_INTERVAL
            if _step_x(i, divers, k):
                _remove_first_equal(i, divers, counts, DIVERS, k)
            elif divers[i, k, X] == sub_x[i] and divers[i, k, Y] == sub_y[i] and diver_count[i] < MAX_DIVERS:
                _remove_first_equal(i, divers, counts, DIVERS, k)
                diver_count[i] += 1
        else:
            divers[i, k, TIMER] -= 1
        k -= 1

    gained, hit = _move_enemies(i, subs, SUBS, f_bullets, e_bullets, counts, sub_x, sub_y, move_speed, True)
    reward += gained
    terminal = terminal or hit

    # enemy bullets
    k = counts[i, E_BULLETS] - 1
    while 0 <= k < counts[i, E_BULLETS]:
        if e_bullets[i, k, X] == sub_x[i] and e_bullets[i, k, Y] == sub_y[i]:
            terminal = True
        if _step_x(i, e_bullets, k):
            _remove_first_equal(i, e_bullets, counts, E_BULLETS, k)
        elif e_bullets[i, k, X] == sub_x[i] and e_bullets[i, k, Y] == sub_y[i]:
            terminal = True
        k -= 1

    gained, hit = _move_enemies(i, fish, FISH, f_bullets, e_bullets, counts, sub_x, sub_y, move_speed, False)
    reward += gained
    terminal = terminal or hit

    if e_spawn_timer[i] > 0:
        e_spawn_timer[i] -= 1
    if d_spawn_timer[i] > 0:
        d_spawn_timer[i] -= 1
    if shot_timer[i] > 0:
        shot_timer[i] -= 1
    if oxygen[i] <= 0:
        terminal = True
    if sub_y[i] > 0:
        oxygen[i] -= 1
        surface[i] = False
    elif not surface[i]:
        if diver_count[i] == 0:
            terminal = True
        else:
            surface[i] = True
            if diver_count[i] == MAX_DIVERS:
                diver_count[i] = 0
                reward += oxygen[i] * 10 // MAX_OXYGEN
            oxygen[i] = MAX_OXYGEN
            # as in the original, also after a full load: the count then goes below 0
            diver_count[i] -= 1
            if difficulty_ramping and (e_spawn_speed[i] > 1 or move_speed[i] > 2):
                if move_speed[i] > 2 and ramp_index[i] % 2:
                    move_speed[i] -= 1
                if e_spawn_speed[i] > 1:
                    e_spawn_speed[i] -= 1
                ramp_index[i] += 1
    return reward, terminal


@device_function(inline="never")
def _mark_with_trail(i, obs, table, counts, which, channel):
    for row in range(counts[i, which]):
        x, y = table[i, row, X], table[i, row, Y]
        obs[i, y, x, channel] = True
        back = x - 1 if table[i, row, RIGHTWARD] else x + 1
        if 0 <= back <= GRID - 1:
            obs[i, y, back, 3] = True


@device_function(inline="never")
def observe(i, obs, oxygen, diver_count, sub_x, sub_y, sub_right, f_bullets, e_bullets, fish, subs, divers, counts):
    """The (10, 10, 10) bool observation of env ``i``."""
    clear_observation(i, obs)
    obs[i, sub_y[i], sub_x[i], 0] = True
    back = sub_x[i] - 1 if sub_right[i] else sub_x[i] + 1
    obs[i, sub_y[i], back % GRID, 1] = True  # numpy's negative index, as the original (never off the grid)
    for x in range(max(0, oxygen[i]) * 10 // MAX_OXYGEN):
        obs[i, GRID - 1, x, 7] = True
    for x in range(max(0, GRID - 1 - diver_count[i]), GRID - 1):
        obs[i, GRID - 1, x, 8] = True
    for row in range(counts[i, F_BULLETS]):
        obs[i, f_bullets[i, row, Y], f_bullets[i, row, X], 2] = True
    for row in range(counts[i, E_BULLETS]):
        obs[i, e_bullets[i, row, Y], e_bullets[i, row, X], 4] = True
    _mark_with_trail(i, obs, fish, counts, FISH, 5)
    _mark_with_trail(i, obs, subs, counts, SUBS, 6)
    _mark_with_trail(i, obs, divers, counts, DIVERS, 9)


@env_kernel
def step(
    i,
    actions,
    rng_states,
    obs,
    rewards,
    terminated,
    last_action,
    oxygen,
    diver_count,
    sub_x,
    sub_y,
    sub_right,
    f_bullets,
    e_bullets,
    fish,
    subs,
    divers,
    counts,
    e_spawn_speed,
    e_spawn_timer,
    d_spawn_timer,
    move_speed,
    ramp_index,
    shot_timer,
    surface,
    sticky_action_prob,
    difficulty_ramping,
    minimal_action_set,
):
    """One Seaquest step of env ``i``."""
    action = sticky(
        rng_states, i, full_action(actions[i], minimal_action_set, _MASK), last_action[i], sticky_action_prob
    )
    last_action[i] = action
    reward, terminal = play(
        i,
        action,
        rng_states,
        oxygen,
        diver_count,
        sub_x,
        sub_y,
        sub_right,
        f_bullets,
        e_bullets,
        fish,
        subs,
        divers,
        counts,
        e_spawn_speed,
        e_spawn_timer,
        d_spawn_timer,
        move_speed,
        ramp_index,
        shot_timer,
        surface,
        difficulty_ramping,
    )
    rewards[i] = reward
    terminated[i] = terminal
    observe(i, obs, oxygen, diver_count, sub_x, sub_y, sub_right, f_bullets, e_bullets, fish, subs, divers, counts)


@env_kernel
def reset(
    i,
    obs,
    oxygen,
    diver_count,
    sub_x,
    sub_y,
    sub_right,
    f_bullets,
    e_bullets,
    fish,
    subs,
    divers,
    counts,
    e_spawn_speed,
    e_spawn_timer,
    d_spawn_timer,
    move_speed,
    ramp_index,
    shot_timer,
    surface,
):
    """A new Seaquest episode for env ``i``."""
    start(
        i,
        oxygen,
        diver_count,
        sub_x,
        sub_y,
        sub_right,
        f_bullets,
        e_bullets,
        fish,
        subs,
        divers,
        counts,
        e_spawn_speed,
        e_spawn_timer,
        d_spawn_timer,
        move_speed,
        ramp_index,
        shot_timer,
        surface,
    )
    observe(i, obs, oxygen, diver_count, sub_x, sub_y, sub_right, f_bullets, e_bullets, fish, subs, divers, counts)


# The bounds of a table row's fields (X, Y, RIGHTWARD, TIMER, SHOT): x may be one column
# past either edge (a row leaves the table there), timers count down from their interval.
_ROW_LOW = np.array([-1, 0, 0, 0, 0])
_ROW_HIGH = np.array([GRID, GRID - 1, 1, max(INIT_MOVE_INTERVAL, DIVER_MOVE_INTERVAL), ENEMY_SHOT_INTERVAL + 1])
_CAPACITIES = np.array(list(CAPACITY.values()))

STATE = (
    StateArray("last_action", np.int32, restore_on_reset=True, low=0, high=NUM_ACTIONS - 1),
    StateArray("oxygen", np.int32, low=-1, high=MAX_OXYGEN),
    StateArray("diver_count", np.int32, low=0, high=MAX_DIVERS),
    StateArray("sub_x", np.int32, low=0, high=GRID - 1),
    StateArray("sub_y", np.int32, low=0, high=GRID - 2),
    StateArray("sub_right", np.bool_),
    # object tables: rows of (x, y, rightward[, timer[, shot]]) in the original's list order
    StateArray("f_bullets", np.int8, shape=(CAPACITY["f_bullets"], 3), low=_ROW_LOW[:3], high=_ROW_HIGH[:3]),
    StateArray("e_bullets", np.int8, shape=(CAPACITY["e_bullets"], 3), low=_ROW_LOW[:3], high=_ROW_HIGH[:3]),
    StateArray("fish", np.int8, shape=(CAPACITY["fish"], 4), low=_ROW_LOW[:4], high=_ROW_HIGH[:4]),
    StateArray("subs", np.int8, shape=(CAPACITY["subs"], 5), low=_ROW_LOW, high=_ROW_HIGH),
    StateArray("divers", np.int8, shape=(CAPACITY["divers"], 4), low=_ROW_LOW[:4], high=_ROW_HIGH[:4]),
    # rows in use, per table (CAPACITY's order)
    StateArray("counts", np.int32, shape=(len(CAPACITY),), low=0, high=_CAPACITIES),
    StateArray("e_spawn_speed", np.int32, low=1, high=INIT_SPAWN_SPEED),
    StateArray("e_spawn_timer", np.int32, low=0, high=INIT_SPAWN_SPEED),
    StateArray("d_spawn_timer", np.int32, low=0, high=DIVER_SPAWN_SPEED),
    StateArray("move_speed", np.int32, low=1, high=INIT_MOVE_INTERVAL),
    StateArray("ramp_index", np.int32, low=0, high=NO_BOUND),
    StateArray("shot_timer", np.int32, low=0, high=SHOT_COOL_DOWN),
    StateArray("surface", np.bool_),
)

REFERENCE = reference_for(STATE, step, reset, observe, CHANNELS)


def check_invariants(params, state):
    """The submarine stays in rows 0-8, every table within its capacity and its rows on the grid."""
    assert 0 <= int(state["sub_x"]) < GRID and 0 <= int(state["sub_y"]) <= GRID - 2, (
        f"submarine ({int(state['sub_x'])}, {int(state['sub_y'])}) off its area"
    )
    for which, (name, capacity) in enumerate(CAPACITY.items()):
        count = int(state["counts"][which])
        assert 0 <= count < capacity, f"{name}: {count} rows, expected fewer than the capacity {capacity}"
        rows = state[name][:count]
        assert np.all((rows[:, X] >= 0) & (rows[:, X] < GRID)), f"{name} x {rows[:, X]} off the grid"
    assert int(state["diver_count"]) <= MAX_DIVERS, f"diver_count {int(state['diver_count'])}"
    assert int(state["oxygen"]) <= MAX_OXYGEN, f"oxygen {int(state['oxygen'])}"


SPECS = make_specs(
    "Seaquest",
    CHANNELS,
    MINIMAL_ACTIONS,
    state=STATE,
    step_kernel=step,
    reset_kernel=reset,
    reference=REFERENCE,
    invariants=check_invariants,
    render="kernelgym.minatar.render:render_seaquest",
    description="Rescue divers, shoot enemies, surface for oxygen",
)


@hookimpl
def kernelgym_register_envs():
    """Provide MinAtar-Seaquest-v1 and MinAtar-Seaquest-v0."""
    return list(SPECS)
