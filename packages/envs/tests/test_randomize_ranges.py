"""randomize= and set_randomize ranges are cast-checked as set_params values are (issue 36, class 3):
a bound the table's dtype cannot hold, or a width high - low that overflows it, drew inf."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kernelgym.envs as kge


@pytest.mark.parametrize(
    "precision, ranges, message",
    [
        ("float32", {"length": (0.5, 1e39)}, r"randomize\['length'\]: got 1e\+39, which overflows float32"),
        ("float64", {"gravity": (-1e308, 1e308)}, r"randomize\['gravity'\]: expected a range whose width high - low"),
        ("float32", {"gravity": (-3e38, 3e38)}, r"width high - low is finite in float32 .*got \(-3e\+38, 3e\+38\)"),
    ],
)
def test_a_range_whose_draws_would_be_inf_is_refused_at_make(precision, ranges, message):
    with pytest.raises(ValueError, match=message):
        kge.make("CartPole-v1", 4, backend="cpu", precision=precision, randomize=ranges)


@pytest.fixture(scope="module")
def randomized():
    env = kge.make("CartPole-v1", 4, backend="cpu", seed=0, precision="float32", randomize={"length": (0.4, 0.6)})
    yield env
    env.close()


@settings(max_examples=15, deadline=None)
@given(low=st.floats(-1e39, 1e39, allow_nan=False), width=st.floats(0.0, 1e39, allow_nan=False))
def test_fuzz_set_randomize_takes_a_range_only_if_its_draws_are_finite(randomized, low, width):
    high = low + width
    if not np.isfinite(high):
        return
    with np.errstate(over="ignore"):  # the draw low + (high - low) * u, in float32
        low32, high32 = np.float32(low), np.float32(high)
        finite = bool(np.isfinite(low32) and np.isfinite(high32) and np.isfinite(high32 - low32))
    before = randomized.randomize
    try:
        randomized.set_randomize({"gravity": (low, high)})
    except ValueError as refused:
        assert not finite, refused
        assert "randomize['gravity']" in str(refused)
        assert randomized.randomize == before  # refused: the ranges are as they were
        return
    assert finite
    randomized.reset(seed=1)
    assert np.all(np.isfinite(randomized.get_params()["gravity"]))
    randomized.set_randomize({"length": (0.4, 0.6)})
