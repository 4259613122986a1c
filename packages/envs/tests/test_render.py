"""Rendering: RGB uint8 pictures drawn with numpy that follow the state, and GIF-able frames."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgym.core import rng
from kernelgym.envs import render
from kernelgym.envs.classic.cartpole import SPEC as CARTPOLE
from kernelgym.envs.tag.continuous import REFERENCE as CONTINUOUS_REFERENCE
from kernelgym.envs.tag.continuous import TagContinuousParams
from kernelgym.envs.tag.gridworld import REFERENCE as GRIDWORLD_REFERENCE
from kernelgym.envs.tag.gridworld import TagGridWorldParams


def colour_mask(picture, colour):
    return np.all(picture == np.array(colour, np.uint8), axis=-1)


def centroid(mask):
    rows, cols = np.nonzero(mask)
    return cols.mean(), rows.mean()


def cartpole_batch(xs, thetas):
    zeros = np.zeros(len(xs), np.float32)
    return {"x": np.float32(xs), "x_dot": zeros, "theta": np.float32(thetas), "theta_dot": zeros}


def batch_of(states):
    """Stack single-env state dicts into a batch, as the runtime hands them to a renderer."""
    return {name: np.stack([state[name] for state in states]) for name in states[0]}


@settings(max_examples=20)
@given(st.floats(-2.2, 1.7), st.floats(0.05, 0.4))  # the cart stays fully in the picture
def test_the_cart_moves_right_when_x_grows(x, shift):
    params = CARTPOLE.params
    batch = cartpole_batch([x, x + shift], [0.0, 0.0])
    left, right = (render.render_cartpole(batch, index, params) for index in (0, 1))
    assert left.shape == (400, 600, 3) and left.dtype == np.uint8
    left_x, _ = centroid(colour_mask(left, render.CART_BROWN))
    right_x, _ = centroid(colour_mask(right, render.CART_BROWN))
    # x in metres times the 125 px/m scale of a 4.8 m wide world
    assert right_x - left_x == pytest.approx(shift * 600 / 4.8, abs=1.0)


def test_the_pole_leans_with_theta():
    params = CARTPOLE.params
    batch = cartpole_batch([0.0, 0.0, 0.0], [0.0, 0.2, -0.2])
    pictures = [render.render_cartpole(batch, index, params) for index in range(3)]
    upright, right, left = (centroid(colour_mask(p, render.POLE_TAN))[0] for p in pictures)
    assert upright == pytest.approx(300, abs=1.0) and right > upright + 10 and left < upright - 10
    # the track is drawn on every picture
    assert colour_mask(pictures[0], render.BLACK)[300, :250].all()


def test_gridworld_picture_shows_taggers_runners_and_tagged_runners():
    params = TagGridWorldParams(num_taggers=2, num_runners=2, grid_length=4)
    start = GRIDWORLD_REFERENCE.reset(params)
    moved = {
        **start,
        "loc_x": np.int32([2, 4, 0, 3]),
        "loc_y": np.int32([2, 4, 0, 1]),
        "in_game": np.array([True, True, True, False]),
    }
    batch = batch_of([start, moved])
    first, second = (render.render_tag_gridworld(batch, index, params) for index in (0, 1))
    assert first.shape == second.shape and first.dtype == np.uint8 and first.ndim == 3
    assert colour_mask(first, render.TAGGER_RED).any() and colour_mask(first, render.RUNNER_BLUE).any()
    assert not colour_mask(first, render.OUT_GREY).any()
    assert colour_mask(second, render.OUT_GREY).any()  # runner 3 is out of the game
    # tagger 1 moved from the centre cell (2, 2) to the top-right corner (4, 4)
    red = colour_mask(second, render.TAGGER_RED)
    cell = 400 // 5
    assert red[int(0.5 * cell), int(4.5 * cell)] and red[int(2.5 * cell), int(2.5 * cell)]
    assert not colour_mask(first, render.TAGGER_RED)[int(0.5 * cell), int(4.5 * cell)]


def test_continuous_picture_greys_out_tagged_runners_and_follows_positions():
    params = TagContinuousParams(num_taggers=1, num_runners=3)
    state = CONTINUOUS_REFERENCE.reset(params, rng.seed_streams(0, params.num_agents))  # one stream per agent
    tagged = {**state, "in_game": np.array([True, True, False, True])}
    shifted = {**state, "loc_x": state["loc_x"] + np.float32([2.0, 0, 0, 0]).clip(None, 10 - state["loc_x"])}
    batch = batch_of([state, tagged, shifted])
    pictures = [render.render_tag_continuous(batch, index, params) for index in range(3)]
    assert pictures[0].shape == (420, 420, 3) and pictures[0].dtype == np.uint8
    assert not colour_mask(pictures[0], render.OUT_GREY).any() and colour_mask(pictures[1], render.OUT_GREY).any()
    tagger_before = centroid(colour_mask(pictures[0], render.TAGGER_RED))
    tagger_after = centroid(colour_mask(pictures[2], render.TAGGER_RED))
    expected_shift = float(shifted["loc_x"][0] - state["loc_x"][0]) * 400 / 10.0
    assert tagger_after[0] - tagger_before[0] == pytest.approx(expected_shift, abs=1.5)
    assert tagger_after[1] == pytest.approx(tagger_before[1], abs=1.0)


def test_bad_index_names_the_argument():
    batch = cartpole_batch([0.0, 0.1], [0.0, 0.0])
    with pytest.raises(ValueError, match=r"render index: expected an int in \[0, 2\), got 2"):
        render.render_cartpole(batch, 2, CARTPOLE.params)


def test_drawing_helpers_clip_at_the_edges():
    canvas = render.blank_canvas(20, 30)
    render.fill_circle(canvas, -2, 5, 4, render.BLACK)  # partly off the canvas
    render.draw_segment(canvas, 25, 10, 40, 10, 3, render.TAGGER_RED)
    render.fill_rectangle(canvas, 50, 50, 60, 60, render.RUNNER_BLUE)  # fully off: nothing
    assert colour_mask(canvas, render.BLACK)[5, 0] and not colour_mask(canvas, render.BLACK)[5, 5]
    assert colour_mask(canvas, render.TAGGER_RED)[10, 29] and not colour_mask(canvas, render.RUNNER_BLUE).any()


def test_frames_of_a_rollout_make_a_gif(tmp_path):
    from PIL import Image

    import kernelgym.envs as kge

    env = kge.make("TagContinuous-v0", num_envs=2, backend="cpu", seed=0, num_runners=4, tagging_distance=0.2)
    env.reset(seed=0)
    frames = []
    generator = np.random.default_rng(0)
    for _ in range(12):
        frames.append(env.render(1))
        env.step(generator.integers(0, 11, size=(2, 5, 2)), numpy=True)
    assert all(frame.shape == (420, 420, 3) and frame.dtype == np.uint8 for frame in frames)
    assert any(not np.array_equal(a, b) for a, b in zip(frames, frames[1:]))
    path = tmp_path / "tag_continuous.gif"
    images = [Image.fromarray(frame) for frame in frames]
    images[0].save(path, save_all=True, append_images=images[1:], duration=100, loop=0)
    with Image.open(path) as gif:
        assert gif.n_frames == len(frames) and gif.size == (420, 420)


@pytest.mark.parametrize(("env_id", "kwargs"), [("CartPole-v1", {}), ("TagGridWorld-v0", {"num_taggers": 3})])
def test_vector_env_render_uses_these_renderers(env_id, kwargs):
    import kernelgym.envs as kge

    env = kge.make(env_id, num_envs=3, backend="cpu", seed=1, **kwargs)
    env.reset(seed=1)
    picture = env.render(2)
    assert picture.dtype == np.uint8 and picture.ndim == 3 and picture.shape[2] == 3
    assert len(np.unique(picture.reshape(-1, 3), axis=0)) >= 3  # background plus drawn shapes
    assert math.isfinite(float(picture.mean()))


@settings(max_examples=20, deadline=None)
@given(st.floats(-math.pi, math.pi))
def test_the_pendulum_rod_points_at_theta(theta):
    from kernelgym.envs.classic.pendulum import SPEC as PENDULUM

    batch = {"theta": np.float32([theta]), "theta_dot": np.float32([0.0])}
    picture = render.render_pendulum(batch, 0, PENDULUM.params)
    assert picture.shape == (500, 500, 3) and picture.dtype == np.uint8
    x, y = centroid(colour_mask(picture, render.ROD_RED))
    # the rod's centre of mass lies half a rod from the pivot, anticlockwise from up by theta
    half_rod = 0.5 * 500 / 2.2
    assert x - 250 == pytest.approx(-half_rod * math.sin(theta), abs=8.0)
    assert 250 - y == pytest.approx(half_rod * math.cos(theta), abs=8.0)


@settings(max_examples=20, deadline=None)
# both cars stay whole in the frame and clear of the goal flag (at 0.5), which would hide
# part of them: only then does the car's centroid move with its position
@given(st.floats(-1.1, 0.25), st.floats(0.02, 0.1))
def test_the_mountain_car_moves_right_when_position_grows(position, shift):
    from kernelgym.envs.classic.mountain_car import SPEC as MOUNTAIN_CAR

    batch = {"position": np.float32([position, position + shift]), "velocity": np.float32([0.0, 0.0])}
    left, right = (render.render_mountain_car(batch, index, MOUNTAIN_CAR.params) for index in (0, 1))
    assert left.shape == (400, 600, 3)
    left_x, _ = centroid(colour_mask(left, render.CART_BROWN))
    right_x, _ = centroid(colour_mask(right, render.CART_BROWN))
    assert right_x - left_x == pytest.approx(shift * 600 / 1.8, abs=2.0)
    assert colour_mask(left, render.FLAG_YELLOW).any()  # the goal flag


def test_the_acrobot_hangs_down_at_rest_and_swings_up():
    from kernelgym.envs.classic.acrobot import SPEC as ACROBOT

    zeros = np.float32([0.0, 0.0])
    batch = {"theta1": np.float32([0.0, math.pi]), "theta2": zeros, "dtheta1": zeros, "dtheta2": zeros}
    down, up = (render.render_acrobot(batch, index, ACROBOT.params) for index in (0, 1))
    assert down.shape == (500, 500, 3)
    _, down_y = centroid(colour_mask(down, render.LINK_TEAL))
    _, up_y = centroid(colour_mask(up, render.LINK_TEAL))
    assert down_y > 250 + 50 and up_y < 250 - 50  # pixel rows grow downwards


@pytest.mark.parametrize("env_id", ["Pendulum-v1", "MountainCar-v0", "Acrobot-v1"])
def test_every_classic_env_renders_through_the_runtime(env_id):
    import kernelgym.envs as kge

    env = kge.make(env_id, num_envs=2, backend="cpu", seed=0)
    env.reset(seed=0)
    picture = env.render(1)
    assert picture.dtype == np.uint8 and picture.ndim == 3 and len(np.unique(picture.reshape(-1, 3), axis=0)) >= 3
