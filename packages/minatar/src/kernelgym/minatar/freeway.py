"""MinAtar Freeway: lead a chicken up across eight lanes of traffic.

The chicken stands in column 4 and moves up or down at most once every 3 frames. Reaching
the top row gives +1, puts the chicken back on the bottom row and draws new car speeds.
Each lane ``1 .. 8`` holds one car moving left or right by one cell every 1 to 5 frames
(its speed), wrapping around the edges; a car that reaches the chicken's cell sends it
back to the bottom. The episode ends after 2500 frames. At a reset every car starts in
column 0 with a new speed and direction: 8 ``randint(1, 6)`` draws, then 8 uniform
draws (direction: the sign of ``u - 0.5``), the original's order.

Channels: 0 chicken, 1 car, 2-6 trail of a car of speed 1-5 (the cell behind it).
Minimal action set: n, u, d. Freeway has no difficulty ramp.
"""

from __future__ import annotations

import numpy as np

from kernelgym.core import device_function, env_kernel, rng
from kernelgym.envs.hookspecs import hookimpl
from kernelgym.envs.spec import StateArray
from kernelgym.minatar._common import (
    DOWN,
    GRID,
    NUM_ACTIONS,
    UP,
    action_mask,
    clear_observation,
    full_action,
    make_specs,
    reference_for,
    sticky,
)

__all__ = ["CHANNELS", "MINIMAL_ACTIONS", "SPECS", "play", "reset", "start", "step"]

CHANNELS = 7
MINIMAL_ACTIONS = (0, UP, DOWN)
_MASK = action_mask(MINIMAL_ACTIONS)
CARS = 8
PLAYER_SPEED = 3  # frames between two moves of the chicken
TIME_LIMIT = 2500
CHICKEN_X = 4


@device_function
def _draw_speeds(i, rng_states, car_timer, car_speed):
    """New speeds (1-5, signed by direction): all magnitudes first, then all directions."""
    for car in range(CARS):
        car_speed[i, car] = 1 + rng.randint(rng_states, i, 5)
    for car in range(CARS):
        u = rng.uniform(rng_states, i)
        sign = 1 if u > 0.5 else (-1 if u < 0.5 else 0)
        car_speed[i, car] = car_speed[i, car] * sign
        car_timer[i, car] = abs(car_speed[i, car])


@device_function(inline="never")
def start(i, rng_states, pos, move_timer, time_left, car_x, car_timer, car_speed):
    """A new episode for env ``i``: every car in column 0 with a new speed."""
    _draw_speeds(i, rng_states, car_timer, car_speed)
    for car in range(CARS):
        car_x[i, car] = 0
    pos[i] = GRID - 1
    move_timer[i] = PLAYER_SPEED
    time_left[i] = TIME_LIMIT


@device_function(inline="never")
def play(i, action, rng_states, pos, move_timer, time_left, car_x, car_timer, car_speed):
    """Env ``i`` plays game action ``action``: returns (reward, terminal)."""
    reward = 0
    if action == UP and move_timer[i] == 0:
        move_timer[i] = PLAYER_SPEED
        pos[i] = max(0, pos[i] - 1)
    elif action == DOWN and move_timer[i] == 0:
        move_timer[i] = PLAYER_SPEED
        pos[i] = min(GRID - 1, pos[i] + 1)
    if pos[i] == 0:  # across: new speeds, the cars stay where they are
        reward += 1
        _draw_speeds(i, rng_states, car_timer, car_speed)
        pos[i] = GRID - 1
    for car in range(CARS):
        lane = car + 1
        if car_x[i, car] == CHICKEN_X and lane == pos[i]:
            pos[i] = GRID - 1
        if car_timer[i, car] == 0:
            car_timer[i, car] = abs(car_speed[i, car])
            x = car_x[i, car] + (1 if car_speed[i, car] > 0 else -1)
            car_x[i, car] = GRID - 1 if x < 0 else (0 if x > GRID - 1 else x)
            if car_x[i, car] == CHICKEN_X and lane == pos[i]:
                pos[i] = GRID - 1
        else:
            car_timer[i, car] -= 1
    if move_timer[i] > 0:
        move_timer[i] -= 1
    time_left[i] -= 1
    return reward, time_left[i] < 0


@device_function
def observe(i, obs, pos, car_x, car_speed):
    """The (10, 10, 7) bool observation of env ``i``."""
    clear_observation(i, obs)
    obs[i, pos[i], CHICKEN_X, 0] = True
    for car in range(CARS):
        x = car_x[i, car]
        obs[i, car + 1, x, 1] = True
        back = x - 1 if car_speed[i, car] > 0 else x + 1
        back = GRID - 1 if back < 0 else (0 if back > GRID - 1 else back)
        obs[i, car + 1, back, 1 + abs(car_speed[i, car])] = True


@env_kernel
def step(
    i,
    actions,
    rng_states,
    obs,
    rewards,
    terminated,
    last_action,
    pos,
    move_timer,
    time_left,
    car_x,
    car_timer,
    car_speed,
    sticky_action_prob,
    minimal_action_set,
):
    """One Freeway step of env ``i``."""
    action = sticky(
        rng_states, i, full_action(actions[i], minimal_action_set, _MASK), last_action[i], sticky_action_prob
    )
    last_action[i] = action
    reward, terminal = play(i, action, rng_states, pos, move_timer, time_left, car_x, car_timer, car_speed)
    rewards[i] = reward
    terminated[i] = terminal
    observe(i, obs, pos, car_x, car_speed)


@env_kernel
def reset(i, rng_states, obs, pos, move_timer, time_left, car_x, car_timer, car_speed):
    """A new Freeway episode for env ``i``."""
    start(i, rng_states, pos, move_timer, time_left, car_x, car_timer, car_speed)
    observe(i, obs, pos, car_x, car_speed)


STATE = (
    StateArray("last_action", np.int32, restore_on_reset=True, low=0, high=NUM_ACTIONS - 1),
    StateArray("pos", np.int32, low=0, high=GRID - 1),  # the chicken's row
    StateArray("move_timer", np.int32, low=0, high=PLAYER_SPEED),
    StateArray("time_left", np.int32, low=-1, high=TIME_LIMIT),
    StateArray("car_x", np.int32, shape=(CARS,), low=0, high=GRID - 1),  # car k drives in row k + 1
    StateArray("car_timer", np.int32, shape=(CARS,), low=0, high=5),
    StateArray("car_speed", np.int32, shape=(CARS,), low=-5, high=5),  # frames per move, signed by direction
)

REFERENCE = reference_for(STATE, step, reset, observe, CHANNELS)


def check_invariants(params, state):
    """The chicken and the cars stay on the grid; speeds are 1-5 frames; the clock runs down."""
    assert 0 <= int(state["pos"]) < GRID, f"pos {int(state['pos'])} off the grid"
    assert np.all((state["car_x"] >= 0) & (state["car_x"] < GRID)), f"car_x {state['car_x']} off the grid"
    assert np.all((np.abs(state["car_speed"]) >= 1) & (np.abs(state["car_speed"]) <= 5)), (
        f"car_speed {state['car_speed']} not in +-1..5"
    )
    assert np.all((state["car_timer"] >= 0) & (state["car_timer"] <= 5)), f"car_timer {state['car_timer']}"
    assert 0 <= int(state["move_timer"]) <= PLAYER_SPEED, f"move_timer {int(state['move_timer'])}"
    assert -1 <= int(state["time_left"]) <= TIME_LIMIT, f"time_left {int(state['time_left'])}"


SPECS = make_specs(
    "Freeway",
    CHANNELS,
    MINIMAL_ACTIONS,
    state=STATE,
    step_kernel=step,
    reset_kernel=reset,
    reference=REFERENCE,
    invariants=check_invariants,
    render="kernelgym.minatar.render:render_freeway",
    description="Cross eight lanes of traffic",
)


@hookimpl
def kernelgym_register_envs():
    """Provide MinAtar-Freeway-v1 and MinAtar-Freeway-v0."""
    return list(SPECS)
