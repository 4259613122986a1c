"""The kit's hypothesis strategies draw what they promise."""

import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st

import kernelgym.envs as kge
from kernelgym.core.kernels import ENV_THREADS_PER_BLOCK
from kernelgym.envs.testing import strategies as kst
from kit_fixtures import walk

SPACES = [
    spaces.Discrete(5),
    spaces.Discrete(3, start=-1),
    spaces.MultiDiscrete([11, 4]),
    spaces.Box(-2.0, 2.0, shape=(1,), dtype=np.float32),
    spaces.Box(np.array([-1.0, 0.0], np.float32), np.array([np.inf, 1.0], np.float32)),
]


def test_batch_sizes_cover_one_primes_and_partial_blocks():
    for backend, sizes in kst.NUM_ENVS.items():
        assert 1 in sizes and 2 in sizes and 3 in sizes, backend
        if backend != "sim":
            assert any(size > ENV_THREADS_PER_BLOCK and size % ENV_THREADS_PER_BLOCK for size in sizes), backend


@settings(max_examples=40)
@given(data=st.data(), space=st.sampled_from(SPACES), count=st.integers(1, 6), agents=st.integers(1, 3))
def test_valid_actions_lie_in_the_space(data, space, count, agents):
    batch = data.draw(kst.batch_actions(space, count, agents))
    agent_shape = (agents,) if agents > 1 else ()
    assert batch.shape == (count, *agent_shape, *space.shape)
    for action in batch.reshape(-1, *space.shape):
        assert space.contains(action.astype(space.dtype)), action
    generator = np.random.default_rng(data.draw(kst.seeds()))
    drawn = kst.random_actions(space, (count, *agent_shape), generator)
    assert drawn.shape == batch.shape and drawn.dtype == batch.dtype
    assert all(space.contains(action.astype(space.dtype)) for action in drawn.reshape(-1, *space.shape))


@settings(max_examples=60)
@given(data=st.data(), space=st.sampled_from(SPACES), count=st.integers(1, 6), agents=st.integers(1, 3))
def test_invalid_actions_break_the_space_shape_or_dtype(data, space, count, agents):
    bad = data.draw(kst.invalid_actions(space, count, agents))
    expected_shape = (count, *((agents,) if agents > 1 else ()), *space.shape)
    discrete = not isinstance(space, spaces.Box)
    if bad.kind == "wrong_shape":
        assert bad.actions.shape != expected_shape and bad.expected is ValueError
    elif bad.kind == "wrong_dtype" or (bad.kind == "non_finite" and discrete):
        assert bad.actions.dtype.kind != ("f" if not discrete else "i") and bad.expected is TypeError
    elif bad.kind == "non_finite":  # a Box: the runtime refuses NaN and inf even where a bound is inf
        assert bad.actions.shape == expected_shape and bad.expected is ValueError
        assert np.count_nonzero(~np.isfinite(bad.actions)) == 1
    else:
        assert bad.actions.shape == expected_shape
        outside = [a for a in bad.actions.reshape(-1, *space.shape) if not space.contains(a.astype(space.dtype))]
        assert len(outside) == 1, bad
        assert bad.expected == ("clip" if not discrete else ValueError)


@pytest.mark.parametrize("env_id", ["CartPole-v1", "TagGridWorld-v0"])
@settings(max_examples=15)
@given(data=st.data())
def test_states_have_the_spec_shapes_and_dtypes(env_id, data):
    spec = kge.get_spec(env_id)
    resolved = spec.resolve()
    state = data.draw(kst.states(spec, spec.params))
    assert set(state) == set(resolved.state_shapes)
    for array in spec.state:
        value = np.asarray(state[array.name])
        assert value.shape == resolved.state_shapes[array.name]
        assert np.can_cast(value.dtype, array.dtype, casting="same_kind")


@settings(max_examples=30)
@given(state=kst.reached_states(walk.REFERENCE, walk.WalkParams(), spaces.Discrete(3)))
def test_reached_states_keep_the_invariants(state):
    walk.check_invariants(walk.WalkParams(), state)
    # rollouts restart terminated episodes, as autoreset does: never a state past the goal
    assert abs(int(state["position"])) < walk.WalkParams().goal


@settings(max_examples=20)
@given(batch=kst.batches(walk.SPEC, walk.WalkParams(), "cpu", min_envs=2))
def test_batches_are_consistent(batch):
    assert batch.num_envs >= 2
    assert batch.actions.shape == (batch.num_envs,) and len(batch.pending) == batch.num_envs
    other = batch.replace(0, batch.states[-1], np.array(1), not batch.pending[0])
    assert other.pending[0] != batch.pending[0] and other.pending[1:] == batch.pending[1:]
    assert np.array_equal(other.actions[1:], batch.actions[1:]) and other.actions[0] == 1


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="backend"):
        kst.num_envs("tpu")
    with pytest.raises(ValueError, match="min_value"):
        kst.num_envs("sim", min_value=100)
    with pytest.raises(TypeError, match="space"):
        kst.actions(spaces.Tuple([spaces.Discrete(2)]))
