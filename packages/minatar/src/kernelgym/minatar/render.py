"""RGB pictures of MinAtar games in the original's colours.

The original's ``rgb_array`` mode colours each cell by the highest channel set in it,
channel ``c`` taking the ``c``-th of ``C`` colours of seaborn's ``"cubehelix"`` palette
(matplotlib's ``cubehelix`` colormap sampled at ``C`` evenly spaced interior points),
and an empty cell black. `palette` computes those colours from the cubehelix formula
(D. A. Green, 2011, with matplotlib's defaults) without matplotlib or seaborn.

A renderer has the signature `kernelgym.envs.spec.EnvSpec.render` names:
``render(state, index, params) -> (H, W, 3) uint8``, ``state`` holding the whole batch.
"""

from __future__ import annotations

import functools
import importlib
import inspect

import numpy as np

from kernelgym.minatar._common import GRID

__all__ = [
    "cell_colours",
    "palette",
    "render_asterix",
    "render_breakout",
    "render_freeway",
    "render_seaquest",
    "render_space_invaders",
]

_LUT_SIZE = 256  # matplotlib's colormaps are lookup tables of 256 entries
# matplotlib's cubehelix (gamma 1, s 0.5, r -1.5, h 1): per colour channel, (p0, p1)
_CUBEHELIX = ((-0.14861, 1.78277), (-0.29227, -0.90649), (1.97294, 0.0))


def palette(num_channels: int) -> np.ndarray:
    """The original's colours: black, then one RGB float colour per channel, ``(C + 1, 3)``."""
    lut = np.linspace(0.0, 1.0, _LUT_SIZE)
    amplitude = lut * (1 - lut) / 2
    phi = 2 * np.pi * (0.5 / 3 + -1.5 * lut)
    table = np.stack(
        [np.clip(lut + amplitude * (p0 * np.cos(phi) + p1 * np.sin(phi)), 0.0, 1.0) for p0, p1 in _CUBEHELIX], axis=1
    )
    points = np.linspace(0.0, 1.0, num_channels + 2)[1:-1]
    # matplotlib's lookup: entry int(x * N), clipped to the table
    entries = np.minimum((points * _LUT_SIZE).astype(int), _LUT_SIZE - 1)
    return np.concatenate([np.zeros((1, 3)), table[entries]])


def cell_colours(observation: np.ndarray) -> np.ndarray:
    """The original's ``rgb_array`` for one ``(10, 10, C)`` bool observation: ``(10, 10, 3)`` floats."""
    channels = observation.shape[-1]
    numbered = np.amax(observation * np.arange(1, channels + 1).reshape(1, 1, -1), axis=2)
    return palette(channels)[numbered]


def _render(module_name: str, state, index, params, cell: int = 32) -> np.ndarray:
    module = importlib.import_module(f"kernelgym.minatar.{module_name}")
    first = next(iter(state.values()))
    if not isinstance(index, (int, np.integer)) or not 0 <= index < first.shape[0]:
        raise IndexError(f"render index: expected an int in [0, {first.shape[0]}), got {index!r}")
    obs = np.zeros((first.shape[0], GRID, GRID, module.CHANNELS), np.bool_)
    names = list(inspect.signature(module.observe.py_func).parameters)
    values = {**state, "i": int(index), "obs": obs}
    module.observe(*(values[name] for name in names))
    colours = np.round(cell_colours(obs[index]) * 255).astype(np.uint8)
    return np.repeat(np.repeat(colours, cell, axis=0), cell, axis=1)


def _renderer(module_name: str):
    @functools.wraps(_render)
    def render(state, index, params, cell: int = 32) -> np.ndarray:
        return _render(module_name, state, index, params, cell)

    render.__name__ = render.__qualname__ = f"render_{module_name}"
    render.__doc__ = f"MinAtar {module_name} env ``index`` of a batch ``state``: ``(10 * cell, 10 * cell, 3)`` uint8."
    return render


render_asterix = _renderer("asterix")
render_breakout = _renderer("breakout")
render_freeway = _renderer("freeway")
render_seaquest = _renderer("seaquest")
render_space_invaders = _renderer("space_invaders")
