"""The kit's RNG-stream hint: how many values kernel and reference drew, from which stream."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgym.core import env_kernel, rng
from kernelgym.envs.testing import check_env
from kernelgym.envs.testing.stream_hint import MAX_REPLAYED_DRAWS, stream_hint
from kit_fixtures import walk

SEEDS = st.integers(0, 2**32 - 1)


def _advanced(rows, draws):
    """``rows`` (``(k, 2)``) after ``draws[r]`` draws from row ``r``."""
    rows = np.array(rows, dtype=np.uint64).reshape(-1, 2)
    for row, count in enumerate(draws):
        for _ in range(count):
            rng.next_uint64(rows, row)
    return rows


@settings(max_examples=30, deadline=None)
@given(seed=SEEDS, drawn=st.integers(0, 6), expected=st.integers(0, 6))
def test_the_hint_counts_the_draws_of_kernel_and_reference(seed, drawn, expected):
    before = rng.seed_streams(seed, 1)
    kernel, reference = _advanced(before, [drawn]), _advanced(before, [expected])
    hint = stream_hint(before[0], kernel[0], reference[0], per_agent=False)
    if drawn == expected:
        assert hint == ""
        return
    assert (
        f"the kernel drew a different number of values: {drawn} from the env's stream, the reference {expected}" in hint
    ), hint
    if drawn == 0:
        assert "wrong stream index" in hint and "undrawn" in hint
    elif drawn > expected:
        assert "another thread drew from this stream too (a wrong stream index" in hint


@settings(max_examples=20, deadline=None)
@given(seed=SEEDS, other=SEEDS, agents=st.integers(2, 4), data=st.data())
def test_the_hint_names_the_agent_whose_stream_differs_and_a_row_no_draws_reach(seed, other, agents, data):
    before = rng.seed_agent_streams(seed, 1, agents)[0]
    reference = _advanced(before, [1] * agents)
    wrong = data.draw(st.integers(0, agents - 1))
    kernel = reference.copy()
    # another stream's row in this agent's place: what a write to a wrong stream index leaves
    kernel[wrong] = rng.seed_streams(other, 1)[0] if other != seed else _advanced(before[wrong], [3])[0]
    hint = stream_hint(before, kernel, reference, per_agent=True)
    assert f"agent {wrong}'s stream (row {wrong} of the env's rng_states)" in hint, hint
    assert sum(f"agent {agent}'s stream" in hint for agent in range(agents)) == 1, hint
    if other != seed:
        assert f"no 0 to {MAX_REPLAYED_DRAWS} draws from it reach" in hint and "wrong stream index" in hint, hint


@env_kernel
def reset_wrong_stream(i, rng_states, obs, position, energy, goal, start_range):
    """BUG: draws from the next env's stream (the last env from its own)."""
    position[i] = rng.randint(rng_states, min(i + 1, rng_states.shape[0] - 1), 2 * start_range + 1) - start_range
    energy[i] = 0.0
    obs[i, 0] = position[i] / goal
    obs[i, 1] = energy[i]


def test_a_reset_that_draws_from_a_wrong_stream_index_is_explained_as_such():
    spec = walk._spec("WalkWrongStream-v0", reset_kernel=reset_wrong_stream)
    parity = check_env(spec, backend="cpu", max_examples=20, seed=3, checks=["parity"])["parity"]
    assert parity.status == "failed", parity
    # env 0's stream is left undrawn, the last env's is drawn twice
    assert (
        "the kernel drew a different number of values: 0 from the env's stream, the reference 1" in parity.message
        or "2 from the env's stream, the reference 1" in parity.message
    ), parity.message
    assert "wrong stream index" in parity.message, parity.message
