"""EnvSpec, StateArray and params validation."""

import dataclasses

import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import given
from hypothesis import strategies as st

from kernelgym.envs.spec import CPUReference, EnvSpec, StateArray, validate_params


@dataclasses.dataclass(frozen=True)
class Params:
    size: int = 3
    speed: float = 1.5
    wrap: bool = False

    def __post_init__(self):
        if self.size < 1:
            raise ValueError(f"Params size: expected >= 1, got {self.size}")


@dataclasses.dataclass
class MutableParams:
    size: int = 3


def _spec(**overrides):
    fields = dict(
        id="Toy-v0",
        observation_space=lambda params: spaces.Box(-1.0, 1.0, (params.size,), np.float32),
        action_space=spaces.Discrete(2),
        state=(
            StateArray("position", np.float32, shape=lambda params: (params.size,)),
            StateArray("count", np.int32, per_agent=True, restore_on_reset=True),
        ),
        step_kernel="toy.kernels:step",
        reset_kernel="toy.kernels:reset",
        reference="toy.kernels:reference",
        params=Params(),
        num_agents=lambda params: params.size + 1,
        max_episode_steps=lambda params: 10 * params.size,
    )
    fields.update(overrides)
    return EnvSpec(**fields)


def test_resolve_makes_params_dependent_parts_concrete():
    spec = _spec()
    resolved = spec.resolve(Params(size=5))
    assert resolved.num_agents == 6
    assert resolved.observation_space.shape == (5,)
    assert resolved.max_episode_steps == 50
    assert resolved.state_shapes == {"position": (5,), "count": (6,)}
    assert spec.resolve().state_shapes == {"position": (3,), "count": (4,)}


def test_kernels_and_references_may_be_objects_or_lazy_strings():
    from kernelgym.envs.classic import cartpole

    spec = _spec(step_kernel=cartpole.step, reset_kernel=(cartpole.reset,), reference=cartpole.reference)
    assert spec.load_kernels("step_kernel") == (cartpole.step,)
    assert spec.load_kernels("reset_kernel") == (cartpole.reset,)
    assert spec.load("reference") is cartpole.reference
    lazy = _spec(step_kernel="kernelgym.envs.classic.cartpole:step")
    assert lazy.load_kernels("step_kernel") == (cartpole.step,)
    with pytest.raises(TypeError, match="step_kernel: expected a @agent_kernel"):
        _spec(step_kernel=cartpole.step, kernel_layout="agent")


@given(size=st.integers(1, 50), speed=st.integers(-5, 5) | st.floats(-5, 5), wrap=st.booleans())
def test_valid_overrides_are_applied_and_floats_stay_floats(size, speed, wrap):
    params = validate_params(_spec(), {"size": size, "speed": speed, "wrap": wrap})
    assert params == Params(size=size, speed=float(speed), wrap=wrap)
    assert isinstance(params.speed, float)


@given(field=st.sampled_from(["size", "speed", "wrap"]), value=st.sampled_from([True, "3", 2.5, None, [1]]))
def test_wrongly_typed_overrides_are_refused_with_the_field_name(field, value):
    valid = {
        "size": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "speed": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "wrap": lambda v: isinstance(v, bool),
    }[field]
    if valid(value):
        validate_params(_spec(), {field: value})
        return
    with pytest.raises(TypeError, match=field):
        validate_params(_spec(), {field: value})


def test_unknown_and_invalid_params():
    with pytest.raises(TypeError, match="'sizes'"):
        validate_params(_spec(), {"sizes": 3})
    with pytest.raises(ValueError, match="size"):
        validate_params(_spec(), {"size": 0})
    with pytest.raises(TypeError, match="takes no params"):
        validate_params(
            _spec(
                params=None,
                observation_space=spaces.Box(0, 1, (1,)),
                num_agents=1,
                max_episode_steps=None,
                state=(StateArray("position", np.float32),),
            ),
            {"size": 3},
        )


@pytest.mark.parametrize(
    ("overrides", "error", "match"),
    [
        ({"id": "ns/Toy-v0"}, ValueError, "id"),
        ({"id": ""}, ValueError, "id"),
        ({"step_kernel": "no_colon"}, ValueError, "step_kernel"),
        ({"reset_kernel": lambda: None}, TypeError, "reset_kernel"),
        ({"reference": None}, ValueError, "reference"),
        ({"kernel_layout": "block"}, ValueError, "kernel_layout"),
        ({"params": MutableParams()}, TypeError, "frozen"),
        ({"params": Params}, TypeError, "params"),
        ({"num_agents": 0}, ValueError, "num_agents"),
        ({"max_episode_steps": 0}, ValueError, "max_episode_steps"),
        ({"action_space": spaces.Dict({})}, TypeError, "action_space"),
        ({"observation_space": spaces.Discrete(3)}, TypeError, "observation_space"),
        ({"observation_space": "box"}, TypeError, "observation_space"),
        ({"state": (StateArray("a", np.float32), StateArray("a", np.int32))}, ValueError, "duplicate"),
        ({"state": ("position",)}, TypeError, "StateArray"),
    ],
)
def test_bad_specs_fail_at_construction(overrides, error, match):
    with pytest.raises(error, match=match):
        _spec(**overrides)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"name": "not an identifier", "dtype": np.float32}, ValueError, "name"),
        ({"name": "a", "dtype": object}, TypeError, "dtype"),
        ({"name": "a", "dtype": "not-a-dtype"}, TypeError, "dtype"),
        ({"name": "a", "dtype": np.float32, "shape": (0,)}, ValueError, "shape"),
        ({"name": "a", "dtype": np.float32, "shape": 3}, TypeError, "shape"),
        ({"name": "a", "dtype": np.int8, "initial": 1000}, ValueError, "initial"),
        ({"name": "a", "dtype": np.int32, "initial": 0.5}, ValueError, "initial"),
        ({"name": "a", "dtype": np.float32, "initial": "0"}, TypeError, "initial"),
    ],
)
def test_bad_state_arrays(kwargs, error, match):
    with pytest.raises(error, match=match):
        StateArray(**kwargs)


@given(
    dtype=st.sampled_from([np.bool_, np.int8, np.int32, np.int64, np.uint64, np.float32, np.float64]),
    shape=st.lists(st.integers(1, 4), max_size=3).map(tuple),
)
def test_state_arrays_keep_their_exact_dtype(dtype, shape):
    array = StateArray("values", dtype, shape=shape, initial=1)
    assert array.dtype == np.dtype(dtype)
    assert array.resolved_shape(None) == shape


def test_callable_shapes_are_checked_when_resolved():
    array = StateArray("position", np.float32, shape=lambda params: (params.size - 3,))
    with pytest.raises(ValueError, match="position"):
        array.resolved_shape(Params(size=3))
    with pytest.raises(ValueError, match="position"):
        _spec(state=(array,))  # the default params are resolved at construction


def test_load_imports_lazy_references_and_checks_the_field():
    spec = _spec(reference="kernelgym.envs.classic.cartpole:reference")
    assert isinstance(spec.load("reference"), CPUReference)
    assert spec.load("render") is None
    with pytest.raises(KeyError, match="field"):
        spec.load("params")
    with pytest.raises(ModuleNotFoundError):
        spec.load("step_kernel")  # "toy.kernels" does not exist: found only when loaded


def test_spec_is_frozen():
    spec = _spec()
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.id = "Other-v0"


def _clock_spec(clock, **overrides):
    """A toy spec whose extra state array ``clock`` is named as its episode step counter."""
    return _spec(state=_spec().state + (clock,), episode_step="clock", **overrides)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint16])
def test_episode_step_names_a_per_env_integer_counter(dtype):
    spec = _clock_spec(StateArray("clock", dtype))
    assert spec.episode_step == "clock"
    assert _spec().episode_step is None  # the default: the env keeps no step counter


@pytest.mark.parametrize(
    ("build", "error", "match"),
    [
        (lambda: _spec(episode_step="missing"), ValueError, r"episode_step.*'missing'"),
        (lambda: _spec(episode_step=3), ValueError, "episode_step"),
        (lambda: _spec(episode_step="count"), ValueError, r"episode_step.*per env"),  # per_agent array
        (lambda: _clock_spec(StateArray("clock", np.float32)), TypeError, r"episode_step.*integer dtype"),
        (lambda: _clock_spec(StateArray("clock", np.bool_)), TypeError, r"episode_step.*integer dtype"),
        (lambda: _clock_spec(StateArray("clock", np.int32, shape=(2,))), ValueError, r"episode_step.*shape \(\)"),
        (
            lambda: _clock_spec(StateArray("clock", np.int32, shape=lambda params: (params.size,))),
            ValueError,
            r"episode_step.*shape \(\)",
        ),
    ],
)
def test_bad_episode_step_fails_at_construction(build, error, match):
    with pytest.raises(error, match=match):
        build()
