"""State bounds (`StateArray.low`/``high``): ``set_state`` refuses a value a kernel would trust as an index.

Issue 36, class 1: a value outside the env's own bounds (not only the dtype's range) is
refused before anything is written, naming the array, the env and the bound.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kernelgym.envs as kge
from kernelgym.core import rng
from kernelgym.envs import EnvSpec, StateArray
from kernelgym.envs.classic import mountain_car
from kernelgym.envs.spec import reference_reset

BUILT_IN = ("kernelgym-envs", "kernelgym-minatar", "kernelgym-example-plugin")


def test_every_built_in_env_declares_bounds_for_every_number_array():
    specs = [kge.get_spec(env_id) for env_id in kge.list_envs()]
    specs = [spec for spec in specs if spec.distribution in BUILT_IN]
    assert any(spec.id == "TagGridWorld-v0" for spec in specs)
    undeclared = [
        f"{spec.id}:{array.name}"
        for spec in specs
        for array in spec.state
        if array.dtype.kind != "b" and (array.low is None or array.high is None)
    ]
    assert undeclared == []


@pytest.fixture(scope="module")
def tag():
    env = kge.make("TagGridWorld-v0", 6, backend="cpu", seed=0)
    env.reset(seed=0)
    yield env
    env.close()


def test_a_position_off_the_grid_is_refused_naming_array_env_and_bound(tag):
    before = tag.get_state()
    state = tag.get_state()
    state["loc_x"][3, 1] = tag.params.grid_length + 1
    state["loc_y"][0, 0] = 0
    with pytest.raises(ValueError) as refused:
        tag.set_state(state)
    message = str(refused.value)
    for part in ("state['loc_x'][1] of env 3", f"<= {tag.params.grid_length}", "high", "TagGridWorld-v0"):
        assert part in message
    after = tag.get_state()
    for name in before:  # refused: nothing written, loc_y's valid change included
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)


def test_one_env_index_is_checked_against_the_lower_bound(tag):
    before = tag.get_state(2)
    state = tag.get_state(2)
    state["timestep"] = np.int32(-1)
    with pytest.raises(ValueError, match=r"state\['timestep'\] of env 2: expected >= 0 .*low.*got -1"):
        tag.set_state(state, index=2)
    np.testing.assert_array_equal(tag.get_state(2)["timestep"], before["timestep"])
    state["timestep"] = np.int32(tag.params.episode_length)  # the bound itself is inside
    tag.set_state(state, index=2)
    assert int(tag.get_state(2)["timestep"]) == tag.params.episode_length


@pytest.fixture(scope="module")
def car():
    env = kge.make("MountainCar-v0", 3, backend="cpu", seed=0)
    env.reset(seed=0)
    yield env
    env.close()


@settings(max_examples=25, deadline=None)
@given(
    position=st.floats(-3.0, 3.0, width=32),
    velocity=st.floats(-0.25, 0.25, width=32) | st.sampled_from([np.inf, -np.inf]),
)
def test_fuzz_set_state_writes_exactly_the_values_inside_the_bounds(car, position, velocity):
    low, high = np.float32(mountain_car.MIN_POSITION), np.float32(mountain_car.MAX_POSITION)
    inside = low <= np.float32(position) <= high and abs(np.float32(velocity)) <= np.float32(mountain_car.MAX_SPEED)
    before = car.get_state()
    state = {"position": np.float32(position), "velocity": np.float32(velocity)}
    if inside:
        car.set_state(state, index=1)
        written = car.get_state(1)
        assert written["position"] == state["position"] and written["velocity"] == state["velocity"]
    else:
        with pytest.raises(ValueError, match=r"state\['(position|velocity)'\] of env 1: expected"):
            car.set_state(state, index=1)
        after = car.get_state()
        for name in before:
            np.testing.assert_array_equal(after[name], before[name])


def _spec(**bounds):
    return EnvSpec(
        id="Bounded-v0",
        observation_space=mountain_car.SPEC.observation_space,
        action_space=mountain_car.SPEC.action_space,
        state=(StateArray("position", np.float32, **bounds), StateArray("velocity", np.float32)),
        step_kernel=mountain_car.SPEC.step_kernel,
        reset_kernel=mountain_car.SPEC.reset_kernel,
        reference=mountain_car.SPEC.reference,
        params=mountain_car.SPEC.params,
    )


@pytest.mark.parametrize(
    "bounds, error, message",
    [
        ({"low": 1.0, "high": 0.0}, ValueError, "expected low <= high, got low 1.0 and high 0.0"),
        ({"low": float("nan")}, ValueError, "low: expected a number, got NaN"),
        ({"high": "top"}, TypeError, "high: expected a number or an array of numbers, got 'top'"),
        ({"high": np.zeros(3)}, ValueError, r"high: expected a number or an array that broadcasts to one env's shape"),
    ],
)
def test_a_spec_with_unusable_bounds_is_refused_at_registration(bounds, error, message):
    with pytest.raises(error, match=message):
        _spec(**bounds)


@pytest.mark.parametrize(
    "env_id", ["Acrobot-v1", "CartPole-v1", "MountainCar-v0", "Pendulum-v1", "TagContinuous-v0", "TagGridWorld-v0"]
)
def test_every_state_a_reference_rollout_reaches_lies_inside_the_bounds(env_id):
    # bounds tighter than the env would refuse its own states (get_state -> set_state)
    spec = kge.get_spec(env_id)
    resolved = spec.resolve(spec.params)
    reference = spec.load("reference")
    n = resolved.num_agents
    streams = rng.seed_streams(7, 1) if spec.kernel_layout == "env" else rng.seed_agent_streams(7, 1, n).reshape(n, 2)
    space = resolved.action_space
    space.seed(0)
    state, steps = reference_reset(spec, reference.reset, spec.params, streams), 0
    for _ in range(150):
        assert _outside(state, resolved.state_bounds) == []
        action = np.stack([space.sample() for _ in range(n)]) if spec.kernel_layout == "agent" else space.sample()
        state, _, terminated = reference.step(spec.params, state, action, streams)
        steps += 1
        if terminated or steps == resolved.max_episode_steps:  # the runtime truncates there
            assert _outside(state, resolved.state_bounds) == []
            state, steps = reference_reset(spec, reference.reset, spec.params, streams), 0


def _outside(state, bounds):
    """The names of the arrays of one env's ``state`` with a value outside ``bounds``."""
    return sorted(
        name
        for name, (low, high) in bounds.items()
        if (low is not None and np.any(state[name] < low)) or (high is not None and np.any(state[name] > high))
    )
