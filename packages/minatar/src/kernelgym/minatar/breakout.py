"""MinAtar Breakout: bounce a ball off a paddle to break three rows of bricks.

The paddle moves along the bottom row (left, right). The ball travels along diagonals
and is reflected by the walls, the ceiling and the bricks; it breaks the brick it hits
(+1) and turns back, and when every brick is gone three new rows appear once the ball
reaches the bottom row. At the bottom the ball bounces off the paddle: straight back up
when the paddle is under the ball's last column, to the other side when it is under the
ball's new column; otherwise the episode ends. A ball that hits a second brick on the
step right after breaking one passes into that brick's cell (the original's ``strike``
rule). The ball starts at row 3 in the left or right column, heading down and inwards.

Channels: 0 paddle, 1 ball, 2 trail (the ball's previous cell), 3 brick.
Minimal action set: n, l, r.
"""

from __future__ import annotations

import numpy as np

from kernelgym.core import device_function, env_kernel, rng
from kernelgym.envs.hookspecs import hookimpl
from kernelgym.envs.spec import StateArray
from kernelgym.minatar._common import (
    GRID,
    LEFT,
    NUM_ACTIONS,
    RIGHT,
    action_mask,
    clear_observation,
    full_action,
    make_specs,
    reference_for,
    sticky,
)

__all__ = ["CHANNELS", "MINIMAL_ACTIONS", "SPECS", "play", "reset", "start", "step"]

CHANNELS = 4
MINIMAL_ACTIONS = (0, LEFT, RIGHT)
_MASK = action_mask(MINIMAL_ACTIONS)
_BRICK_ROWS = (1, 4)  # rows 1, 2 and 3 hold bricks
_START_ROW = 3


@device_function
def _refill_if_empty(i, brick):
    for y in range(GRID):
        for x in range(GRID):
            if brick[i, y, x]:
                return
    for y in range(_BRICK_ROWS[0], _BRICK_ROWS[1]):
        for x in range(GRID):
            brick[i, y, x] = True


@device_function
def start(i, rng_states, ball_x, ball_y, ball_dir, pos, last_x, last_y, strike, brick):
    """A new episode for env ``i`` (one draw: which side the ball starts on)."""
    if rng.randint(rng_states, i, 2) == 0:
        ball_x[i], ball_dir[i] = 0, 2
    else:
        ball_x[i], ball_dir[i] = GRID - 1, 3
    ball_y[i] = _START_ROW
    last_x[i], last_y[i] = ball_x[i], ball_y[i]
    pos[i] = 4
    strike[i] = False
    for y in range(GRID):
        for x in range(GRID):
            brick[i, y, x] = _BRICK_ROWS[0] <= y < _BRICK_ROWS[1]


@device_function
def play(i, action, ball_x, ball_y, ball_dir, pos, last_x, last_y, strike, brick):
    """Env ``i`` plays game action ``action``: returns (reward, terminal). No random draws."""
    reward = 0
    terminal = False
    if action == LEFT:
        pos[i] = max(0, pos[i] - 1)
    elif action == RIGHT:
        pos[i] = min(GRID - 1, pos[i] + 1)
    last_x[i], last_y[i] = ball_x[i], ball_y[i]
    direction = ball_dir[i]
    # directions: 0 up-left, 1 up-right, 2 down-right, 3 down-left
    new_x = ball_x[i] + (1 if direction == 1 or direction == 2 else -1)
    new_y = ball_y[i] + (1 if direction >= 2 else -1)
    hit_brick = False
    if new_x < 0 or new_x > GRID - 1:
        new_x = min(max(new_x, 0), GRID - 1)
        direction = direction ^ 1  # mirror left and right: 0 <-> 1, 2 <-> 3
    if new_y < 0:
        new_y = 0
        direction = 3 - direction  # mirror up and down: 0 <-> 3, 1 <-> 2
    elif brick[i, new_y, new_x]:
        hit_brick = True
        if not strike[i]:
            reward += 1
            strike[i] = True
            brick[i, new_y, new_x] = False
            new_y = last_y[i]
            direction = 3 - direction
    elif new_y == GRID - 1:
        _refill_if_empty(i, brick)
        if ball_x[i] == pos[i]:
            direction = 3 - direction
            new_y = last_y[i]
        elif new_x == pos[i]:
            direction = direction ^ 2  # reverse: 0 <-> 2, 1 <-> 3
            new_y = last_y[i]
        else:
            terminal = True
    if not hit_brick:
        strike[i] = False
    ball_dir[i] = direction
    ball_x[i], ball_y[i] = new_x, new_y
    return reward, terminal


@device_function
def observe(i, obs, ball_x, ball_y, pos, last_x, last_y, brick):
    """The (10, 10, 4) bool observation of env ``i``."""
    clear_observation(i, obs)
    # bricks are only ever placed in the brick rows (start, refill), so only they are copied
    for y in range(_BRICK_ROWS[0], _BRICK_ROWS[1]):
        for x in range(GRID):
            obs[i, y, x, 3] = brick[i, y, x]
    obs[i, GRID - 1, pos[i], 0] = True
    obs[i, ball_y[i], ball_x[i], 1] = True
    obs[i, last_y[i], last_x[i], 2] = True


@env_kernel
def step(
    i,
    actions,
    rng_states,
    obs,
    rewards,
    terminated,
    last_action,
    ball_x,
    ball_y,
    ball_dir,
    pos,
    last_x,
    last_y,
    strike,
    brick,
    sticky_action_prob,
    minimal_action_set,
):
    """One Breakout step of env ``i``."""
    action = sticky(
        rng_states, i, full_action(actions[i], minimal_action_set, _MASK), last_action[i], sticky_action_prob
    )
    last_action[i] = action
    reward, terminal = play(i, action, ball_x, ball_y, ball_dir, pos, last_x, last_y, strike, brick)
    rewards[i] = reward
    terminated[i] = terminal
    observe(i, obs, ball_x, ball_y, pos, last_x, last_y, brick)


@env_kernel
def reset(i, rng_states, obs, ball_x, ball_y, ball_dir, pos, last_x, last_y, strike, brick):
    """A new Breakout episode for env ``i``."""
    start(i, rng_states, ball_x, ball_y, ball_dir, pos, last_x, last_y, strike, brick)
    observe(i, obs, ball_x, ball_y, pos, last_x, last_y, brick)


STATE = (
    # the game action played last (sticky actions repeat it); 0 at every reset
    StateArray("last_action", np.int32, restore_on_reset=True, low=0, high=NUM_ACTIONS - 1),
    StateArray("ball_x", np.int32, low=0, high=GRID - 1),
    StateArray("ball_y", np.int32, low=0, high=GRID - 1),
    StateArray("ball_dir", np.int32, low=0, high=3),
    StateArray("pos", np.int32, low=0, high=GRID - 1),
    StateArray("last_x", np.int32, low=0, high=GRID - 1),
    StateArray("last_y", np.int32, low=0, high=GRID - 1),
    StateArray("strike", np.bool_),
    StateArray("brick", np.bool_, shape=(GRID, GRID)),
)

REFERENCE = reference_for(STATE, step, reset, observe, CHANNELS)


def check_invariants(params, state):
    """The ball, its trail and the paddle stay on the grid; the ball moves diagonally; bricks
    lie only in the brick rows (``observe`` copies only those)."""
    for name in ("ball_x", "ball_y", "pos", "last_x", "last_y"):
        assert 0 <= int(state[name]) < GRID, f"{name} {int(state[name])} off the grid"
    assert 0 <= int(state["ball_dir"]) <= 3, f"ball_dir {int(state['ball_dir'])} not a direction"
    assert 0 <= int(state["last_action"]) < 6, f"last_action {int(state['last_action'])} not an action"
    outside = np.delete(np.asarray(state["brick"]), np.s_[_BRICK_ROWS[0] : _BRICK_ROWS[1]], axis=0)
    assert not outside.any(), "a brick outside rows 1-3"


SPECS = make_specs(
    "Breakout",
    CHANNELS,
    MINIMAL_ACTIONS,
    state=STATE,
    step_kernel=step,
    reset_kernel=reset,
    reference=REFERENCE,
    invariants=check_invariants,
    render="kernelgym.minatar.render:render_breakout",
    description="Break bricks with a bouncing ball",
)


@hookimpl
def kernelgym_register_envs():
    """Provide MinAtar-Breakout-v1 and MinAtar-Breakout-v0."""
    return list(SPECS)
