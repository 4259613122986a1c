"""Pictures of one env of a batch as RGB ``(H, W, 3)`` uint8 numpy arrays, drawn with numpy.

No display, no pygame: every shape is a boolean mask over pixel coordinates. Each
renderer has the signature an `EnvSpec.render` names::

    render(state, index, params) -> np.ndarray

``state`` maps the env's state array names to numpy arrays of the *whole batch*
(``KernelVectorEnv.render`` copies them from the device), ``index`` picks the env and
``params`` is the env's params record. Pixel rows grow downwards; the renderers flip
the world's y axis so that "up" in the env is up in the picture.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "render_acrobot",
    "render_cartpole",
    "render_mountain_car",
    "render_pendulum",
    "render_tag_gridworld",
    "render_tag_continuous",
]

WHITE = (255, 255, 255)
BLACK = (0, 0, 0)
GRID_GREY = (200, 200, 200)
OUT_GREY = (150, 150, 150)
TAGGER_RED = (214, 39, 40)
RUNNER_BLUE = (31, 119, 180)
CART_BROWN = (101, 67, 33)
POLE_TAN = (202, 152, 101)
AXLE_BLUE = (129, 132, 203)
ROD_RED = (204, 77, 77)
LINK_TEAL = (0, 204, 204)
FLAG_YELLOW = (204, 204, 0)


# ------------------------------------------------------------------ drawing helpers
def blank_canvas(height: int, width: int, color=WHITE) -> np.ndarray:
    """A ``(height, width, 3)`` uint8 picture filled with ``color``."""
    canvas = np.empty((height, width, 3), dtype=np.uint8)
    canvas[...] = color
    return canvas


def _box(canvas, x0, y0, x1, y1):
    """Integer pixel bounds of a float box, clipped to the canvas (may be empty)."""
    height, width = canvas.shape[:2]
    left, right = max(int(math.floor(x0)), 0), min(int(math.ceil(x1)) + 1, width)
    top, bottom = max(int(math.floor(y0)), 0), min(int(math.ceil(y1)) + 1, height)
    return left, right, top, bottom


def fill_rectangle(canvas, x0, y0, x1, y1, color) -> None:
    """Fill the pixels whose centres lie in ``[x0, x1] x [y0, y1]``."""
    left, right, top, bottom = _box(canvas, x0, y0, x1, y1)
    if left >= right or top >= bottom:
        return
    ys, xs = np.mgrid[top:bottom, left:right]
    inside = (xs >= x0) & (xs <= x1) & (ys >= y0) & (ys <= y1)
    canvas[top:bottom, left:right][inside] = color


def fill_circle(canvas, cx, cy, radius, color) -> None:
    """Fill a disc of ``radius`` pixels centred on ``(cx, cy)``."""
    left, right, top, bottom = _box(canvas, cx - radius, cy - radius, cx + radius, cy + radius)
    if left >= right or top >= bottom:
        return
    ys, xs = np.mgrid[top:bottom, left:right]
    inside = (xs - cx) ** 2 + (ys - cy) ** 2 <= radius**2
    canvas[top:bottom, left:right][inside] = color


def draw_segment(canvas, x0, y0, x1, y1, width, color) -> None:
    """Draw a straight bar of ``width`` pixels from ``(x0, y0)`` to ``(x1, y1)``."""
    half = width / 2.0
    left, right, top, bottom = _box(
        canvas, min(x0, x1) - half, min(y0, y1) - half, max(x0, x1) + half, max(y0, y1) + half
    )
    if left >= right or top >= bottom:
        return
    ys, xs = np.mgrid[top:bottom, left:right]
    dx, dy = x1 - x0, y1 - y0
    length_squared = dx * dx + dy * dy
    # the distance of every pixel to the nearest point of the segment
    t = (
        np.zeros_like(xs, dtype=np.float64)
        if length_squared == 0
        else np.clip(((xs - x0) * dx + (ys - y0) * dy) / length_squared, 0.0, 1.0)
    )
    inside = (xs - (x0 + t * dx)) ** 2 + (ys - (y0 + t * dy)) ** 2 <= half * half
    canvas[top:bottom, left:right][inside] = color


def _check_index(state, index, name) -> int:
    num_envs = len(state[name])
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not 0 <= index < num_envs:
        raise ValueError(f"render index: expected an int in [0, {num_envs}), got {index!r}")
    return int(index)


def _agents_in_drawing_order(num_taggers, in_game):
    """``(agent, color)`` of every Tag agent: taggers red, runners blue, tagged runners grey.

    Runners come first, so a tagger on a runner's spot is drawn over it.
    """
    for agent in [*range(num_taggers, len(in_game)), *range(num_taggers)]:
        if agent < num_taggers:
            yield agent, TAGGER_RED
        else:
            yield agent, RUNNER_BLUE if in_game[agent] else OUT_GREY


# ------------------------------------------------------------------------ CartPole
def render_cartpole(state, index, params, width: int = 600, height: int = 400) -> np.ndarray:
    """CartPole env ``index``: the track, the cart at ``x`` and the pole at angle ``theta``.

    Drawn like gymnasium's pygame renderer (600 x 400, the track spans
    ``[-x_threshold, x_threshold]`` and a bit more, the pole is ``2 * length`` long).
    """
    index = _check_index(state, index, "x")
    canvas = blank_canvas(height, width)
    world_width = params.x_threshold * 2
    scale = width / world_width
    pole_length = scale * (2 * params.length)
    cart_width, cart_height, pole_width = 50.0, 30.0, 10.0
    track_y = height - 100.0  # pixel row of the track, as gymnasium's carty = 100 from the bottom
    cart_x = float(state["x"][index]) * scale + width / 2.0
    theta = float(state["theta"][index])
    canvas[int(track_y), :] = BLACK
    fill_rectangle(canvas, cart_x - cart_width / 2, track_y - cart_height, cart_x + cart_width / 2, track_y, CART_BROWN)
    axle_y = track_y - cart_height * 0.75
    # theta = 0 is upright, positive theta leans right (towards +x)
    tip_x = cart_x + pole_length * math.sin(theta)
    tip_y = axle_y - pole_length * math.cos(theta)
    draw_segment(canvas, cart_x, axle_y, tip_x, tip_y, pole_width, POLE_TAN)
    fill_circle(canvas, cart_x, axle_y, pole_width / 2, AXLE_BLUE)
    return canvas


# ------------------------------------------------------------------------ Pendulum
def render_pendulum(state, index, params, size: int = 500) -> np.ndarray:
    """Pendulum env ``index``: a rod from the centre at angle ``theta`` (0 is upright).

    Drawn like gymnasium's renderer: positive ``theta`` turns the rod anticlockwise.
    """
    index = _check_index(state, index, "theta")
    canvas = blank_canvas(size, size)
    theta = float(state["theta"][index])
    scale = size / 2.2  # gymnasium's world spans [-2.2, 2.2]
    centre = size / 2.0
    rod = scale * params.length
    tip_x, tip_y = centre - rod * math.sin(theta), centre - rod * math.cos(theta)
    draw_segment(canvas, centre, centre, tip_x, tip_y, 0.2 * scale, ROD_RED)
    fill_circle(canvas, tip_x, tip_y, 0.1 * scale, ROD_RED)
    fill_circle(canvas, centre, centre, 0.05 * scale, BLACK)
    return canvas


# --------------------------------------------------------------------- MountainCar
def render_mountain_car(state, index, params, width: int = 600, height: int = 400) -> np.ndarray:
    """MountainCar env ``index``: the hill ``sin(3 x)``, the car at ``position``, the goal flag."""
    from kernelgym.envs.classic.mountain_car import MAX_POSITION, MIN_POSITION

    index = _check_index(state, index, "position")
    canvas = blank_canvas(height, width)
    scale = width / (MAX_POSITION - MIN_POSITION)

    def to_pixels(position):
        height_above = math.sin(3 * position) * 0.45 + 0.55
        return (position - MIN_POSITION) * scale, height - height_above * scale

    hill = [to_pixels(x) for x in np.linspace(MIN_POSITION, MAX_POSITION, 60)]
    for (x0, y0), (x1, y1) in zip(hill, hill[1:]):
        draw_segment(canvas, x0, y0, x1, y1, 2.0, BLACK)
    flag_x, flag_y = to_pixels(params.goal_position)
    draw_segment(canvas, flag_x, flag_y, flag_x, flag_y - 50, 2.0, BLACK)
    fill_rectangle(canvas, flag_x, flag_y - 50, flag_x + 25, flag_y - 40, FLAG_YELLOW)
    car_x, car_y = to_pixels(float(state["position"][index]))
    fill_circle(canvas, car_x, car_y - 12, 14, CART_BROWN)
    return canvas


# -------------------------------------------------------------------------- Acrobot
def render_acrobot(state, index, params, size: int = 500) -> np.ndarray:
    """Acrobot env ``index``: two links hanging from the centre, and the goal height line.

    Drawn like gymnasium's renderer: the links hang straight down at zero angles and
    the episode ends when the free end rises above the line one link above the pivot.
    """
    from kernelgym.envs.classic.acrobot import LINK_LENGTH_1 as link  # gymnasium's two links are equally long

    index = _check_index(state, index, "theta1")
    canvas = blank_canvas(size, size)
    scale = size / (2 * (2 * link + 0.2))
    centre = size / 2.0
    theta1, theta2 = float(state["theta1"][index]), float(state["theta2"][index])
    elbow_x = centre + scale * link * math.sin(theta1)
    elbow_y = centre + scale * link * math.cos(theta1)
    end_x = elbow_x + scale * link * math.sin(theta1 + theta2)
    end_y = elbow_y + scale * link * math.cos(theta1 + theta2)
    canvas[int(centre - scale * link), :] = BLACK  # the goal height
    for x0, y0, x1, y1 in ((centre, centre, elbow_x, elbow_y), (elbow_x, elbow_y, end_x, end_y)):
        draw_segment(canvas, x0, y0, x1, y1, 0.2 * scale, LINK_TEAL)
        fill_circle(canvas, x0, y0, 0.1 * scale, FLAG_YELLOW)
    return canvas


# --------------------------------------------------------------------- TagGridWorld
def render_tag_gridworld(state, index, params, size: int = 400) -> np.ndarray:
    """TagGridWorld env ``index``: the grid's cells, taggers red, runners blue, tagged runners grey."""
    index = _check_index(state, index, "loc_x")
    cells = params.grid_length + 1  # positions 0 .. grid_length inclusive
    cell = max(size // cells, 4)
    side = cell * cells
    canvas = blank_canvas(side + 1, side + 1)
    for line in range(cells + 1):
        canvas[line * cell, :] = GRID_GREY
        canvas[:, line * cell] = GRID_GREY
    xs, ys, in_game = state["loc_x"][index], state["loc_y"][index], state["in_game"][index]
    for agent, color in _agents_in_drawing_order(params.num_taggers, in_game):
        centre_x = (int(xs[agent]) + 0.5) * cell
        centre_y = (cells - int(ys[agent]) - 0.5) * cell
        fill_circle(canvas, centre_x, centre_y, cell * 0.35, color)
    return canvas


# -------------------------------------------------------------------- TagContinuous
def render_tag_continuous(state, index, params, size: int = 400) -> np.ndarray:
    """TagContinuous env ``index``: the square, agents as discs with a heading tick.

    Taggers are red, runners blue, runners out of the game grey.
    """
    index = _check_index(state, index, "loc_x")
    margin = 10
    canvas = blank_canvas(size + 2 * margin, size + 2 * margin)
    scale = size / params.grid_length
    for edge in (margin, margin + size):
        canvas[edge, margin : margin + size + 1] = BLACK
        canvas[margin : margin + size + 1, edge] = BLACK
    radius = max(3.0, size * 0.015)
    xs, ys = state["loc_x"][index], state["loc_y"][index]
    directions, in_game = state["direction"][index], state["in_game"][index]
    for agent, color in _agents_in_drawing_order(params.num_taggers, in_game):
        centre_x = margin + float(xs[agent]) * scale
        centre_y = margin + size - float(ys[agent]) * scale
        fill_circle(canvas, centre_x, centre_y, radius, color)
        heading = float(directions[agent])
        draw_segment(
            canvas,
            centre_x,
            centre_y,
            centre_x + 2.2 * radius * math.cos(heading),
            centre_y - 2.2 * radius * math.sin(heading),
            2.0,
            color,
        )
    return canvas
