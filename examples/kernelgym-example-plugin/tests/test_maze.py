"""ImageMaze-v0 under kernelgym's property-test kit, and its constant layout table."""

import numpy as np
import pytest

import kernelgym.envs as kge
from kernelgym.envs.testing import EnvTestSuite
from kernelgym_example_plugin.maze import LAYOUT


class TestImageMaze(EnvTestSuite):
    env_id = "ImageMaze-v0"
    backends = ("cpu", "sim", "cuda")
    max_examples = 5


def test_the_layout_is_one_read_only_table_that_make_can_swap():
    open_room = np.ones((5, 5), np.uint8)
    open_room[1:4, 1:4] = 0
    open_room[3, 3] = 2
    env = kge.make("ImageMaze-v0", 4, backend="cpu", seed=0, layout=open_room)
    obs, _ = env.reset(numpy=True)
    assert obs.shape == (4, 3, 5, 5) and env.single_observation_space.shape == (3, 5, 5)
    np.testing.assert_array_equal(obs[:, 0] == 255, np.broadcast_to(open_room == 1, (4, 5, 5)))
    assert not env.params.layout.flags.writeable
    np.testing.assert_array_equal(kge.make("ImageMaze-v0", 1, backend="cpu").params.layout, LAYOUT)


def test_a_layout_of_the_wrong_kind_is_refused():
    with pytest.raises(TypeError, match="param 'layout': expected ndarray"):
        kge.make("ImageMaze-v0", 1, backend="cpu", layout=np.zeros(7, np.uint8))


@pytest.mark.parametrize(
    "layout, message",
    [
        (np.array([[1, 1, 1], [1, 2, 1], [1, 1, 1]], np.uint8), "at least one free cell"),
        (np.ones((4, 4), np.uint8), "at least one free cell"),
        (np.array([[1, 1, 1], [0, 0, 2], [1, 1, 1]], np.uint8), "walls .1. all around the border"),
        (np.array([[1, 1, 1], [1, 5, 1], [1, 1, 1]], np.uint8), "cells 0 .free., 1 .wall. or 2 .goal."),
    ],
)
def test_a_layout_reset_could_not_start_on_is_refused_at_make(layout, message):
    # reset draws cells until it finds a free one: without one it would loop forever
    with pytest.raises(ValueError, match=f"layout: expected {message}"):
        kge.make("ImageMaze-v0", 1, backend="cpu", layout=layout)
