"""ImageMaze-v0: find the goal of a small maze, seen as an image.

The layout is a constant table: an array-valued params field (0 free, 1 wall, 2 goal),
bound by name as one read-only array shared by every env (no module-level global, and
``make("ImageMaze-v0", n, layout=other)`` swaps the maze). The agent starts on a free
cell drawn from its stream and moves up, right, down or left (walls block); the goal
ends the episode with reward 1, every other step costs ``step_cost``. The observation
is a ``(3, H, W)`` uint8 image: walls, agent, goal, each 0 or 255.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from gymnasium import spaces

from kernelgym.core import device_function, env_kernel, rng
from kernelgym.envs import CPUReference, EnvSpec, StateArray, hookimpl

LAYOUT = np.array(
    [
        [1, 1, 1, 1, 1, 1, 1],
        [1, 0, 0, 0, 1, 2, 1],
        [1, 0, 1, 0, 1, 0, 1],
        [1, 0, 1, 0, 0, 0, 1],
        [1, 0, 1, 1, 1, 0, 1],
        [1, 0, 0, 0, 0, 0, 1],
        [1, 1, 1, 1, 1, 1, 1],
    ],
    np.uint8,
)
MOVES = ((-1, 0), (0, 1), (1, 0), (0, -1))


@dataclasses.dataclass(frozen=True)
class MazeParams:
    layout: np.ndarray = dataclasses.field(default_factory=lambda: LAYOUT)  # a constant table
    step_cost: float = 0.01

    def __post_init__(self):
        # Checked when the env is made: `start_cell` draws until it finds a free cell (it would
        # never return without one), and `move` reads the cell next to the agent unchecked
        # (a border that is not all wall would let it walk off the layout).
        layout = np.asarray(self.layout)
        if layout.ndim != 2 or min(layout.shape) < 3:
            raise ValueError(f"layout: expected a 2-D array of at least 3 x 3 cells, got shape {layout.shape}")
        if not np.isin(layout, (0, 1, 2)).all():
            raise ValueError(f"layout: expected cells 0 (free), 1 (wall) or 2 (goal), got {np.unique(layout).tolist()}")
        border = np.concatenate([layout[0], layout[-1], layout[:, 0], layout[:, -1]])
        if not (border == 1).all():
            raise ValueError(f"layout: expected walls (1) all around the border, got border cells {border.tolist()}")
        if not (layout == 0).any():
            raise ValueError(f"layout: expected at least one free cell (0) to start on, got none in {layout.tolist()}")


@device_function
def start_cell(rng_states, s, layout):
    """A free cell, drawn until one is found (the same draws in kernel and reference)."""
    while True:
        cell = rng.randint(rng_states, s, layout.size)
        row, col = cell // layout.shape[1], cell % layout.shape[1]
        if layout[row, col] == 0:
            return row, col


@device_function
def move(row, col, action, layout):
    dr, dc = (-1, 0) if action == 0 else (0, 1) if action == 1 else (1, 0) if action == 2 else (0, -1)
    return (row, col) if layout[row + dr, col + dc] == 1 else (row + dr, col + dc)


@device_function
def draw(i, obs, row, col, layout):
    for r in range(layout.shape[0]):
        for c in range(layout.shape[1]):
            obs[i, 0, r, c] = 255 if layout[r, c] == 1 else 0
            obs[i, 1, r, c] = 255 if r == row and c == col else 0
            obs[i, 2, r, c] = 255 if layout[r, c] == 2 else 0


@env_kernel
def step(i, actions, obs, rewards, terminated, row, col, layout, step_cost):
    row[i], col[i] = move(row[i], col[i], actions[i], layout)
    terminated[i] = layout[row[i], col[i]] == 2
    rewards[i] = 1.0 if terminated[i] else -step_cost
    draw(i, obs, row[i], col[i], layout)


@env_kernel
def reset(i, rng_states, obs, row, col, layout):
    row[i], col[i] = start_cell(rng_states, i, layout)
    draw(i, obs, row[i], col[i], layout)


def _reset(params, rng_states):
    row, col = start_cell(rng_states, 0, params.layout)
    return {"row": np.int32(row).reshape(()), "col": np.int32(col).reshape(())}


def _step(params, state, action, rng_states):
    row, col = move(int(state["row"]), int(state["col"]), int(action), params.layout)
    done = bool(params.layout[row, col] == 2)
    return (
        {"row": np.int32(row).reshape(()), "col": np.int32(col).reshape(())},
        1.0 if done else -params.step_cost,
        done,
    )


def _observe(params, state):
    obs = np.zeros((1, 3, *params.layout.shape), np.uint8)
    draw(0, obs, int(state["row"]), int(state["col"]), params.layout)
    return obs[0]


SPEC = EnvSpec(
    id="ImageMaze-v0",
    observation_space=lambda p: spaces.Box(0, 255, (3, *p.layout.shape), np.uint8),
    action_space=spaces.Discrete(4),
    # inside the walled border: `move` reads the cells around the agent
    state=(
        StateArray("row", np.int32, low=1, high=lambda params: params.layout.shape[0] - 2),
        StateArray("col", np.int32, low=1, high=lambda params: params.layout.shape[1] - 2),
    ),
    step_kernel=step,
    reset_kernel=reset,
    reference=CPUReference(_reset, _step, _observe),
    params=MazeParams(),
    max_episode_steps=100,
    description="Find the goal of a maze seen as an image (example plugin; a constant table).",
)


@hookimpl
def kernelgym_register_envs():
    return [SPEC]
