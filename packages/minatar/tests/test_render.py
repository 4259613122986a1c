"""Renderers: the original's colours (seaborn's "cubehelix" palette, i.e. matplotlib's
cubehelix colormap at C evenly spaced interior points), one colour per cell."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kernelgym.envs as kge
from kernelgym.minatar.render import cell_colours, palette

GAMES = {"Asterix": 4, "Breakout": 4, "Freeway": 7, "Seaquest": 10, "SpaceInvaders": 6}


@pytest.mark.parametrize("channels", sorted(set(GAMES.values())))
def test_palette_is_matplotlibs_cubehelix(channels):
    colormaps = pytest.importorskip("matplotlib").colormaps
    expected = colormaps["cubehelix"](np.linspace(0, 1, channels + 2)[1:-1])[:, :3]
    assert np.array_equal(palette(channels)[0], [0.0, 0.0, 0.0])
    np.testing.assert_allclose(palette(channels)[1:], expected, rtol=0, atol=1e-12)


@settings(max_examples=20, deadline=None)
@given(cells=st.lists(st.booleans(), min_size=400, max_size=400))
def test_each_cell_takes_the_colour_of_its_highest_channel(cells):
    observation = np.array(cells).reshape(10, 10, 4)
    colours = cell_colours(observation)
    table = palette(4)
    for y in range(10):
        for x in range(10):
            on = np.flatnonzero(observation[y, x])
            assert np.array_equal(colours[y, x], table[on[-1] + 1] if on.size else table[0])


@pytest.mark.parametrize("game", sorted(GAMES))
def test_env_render_draws_the_observation(game):
    env = kge.make(f"MinAtar-{game}-v1", 3, backend="cpu", seed=4)
    try:
        env.reset(seed=4)
        for _ in range(5):
            obs, *_ = env.step(np.zeros(3, np.int64), numpy=True)
        picture = env.render(2)
        assert picture.shape == (320, 320, 3) and picture.dtype == np.uint8
        expected = np.round(cell_colours(obs[2]) * 255).astype(np.uint8)
        assert np.array_equal(picture[::32, ::32], expected)
        assert env.spec.distribution == "kernelgym-minatar"
    finally:
        env.close()
