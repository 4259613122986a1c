"""Binding kernels by name: bound launches equal direct ones; names and extents checked at bind time."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from core_test_kernels import affine, agent_sum, row_sum_into, tally
from kernelgym.core import BindingError, Branch, bind, bind_launches, env_kernel, to_numpy
from kernelgym.core.arrays import to_backend

FINITE = st.floats(-1e6, 1e6, allow_nan=False)
MATRICES = hnp.arrays(np.float64, st.tuples(st.integers(1, 40), st.integers(1, 3)), elements=FINITE)


@env_kernel
def add_where(i, mask, out, x, scale):
    """A body whose parameter order differs from any argument order used below."""
    out[i] += scale * x[i]


@env_kernel
def negate_row(i, out):
    for j in range(out.shape[1]):
        out[i, j] = -out[i, j]


def _values(backend, x, scale, shift):
    return {
        "x": to_backend(x, backend),
        "out": to_backend(np.zeros_like(x), backend),
        "totals": to_backend(np.ones(x.shape[0]), backend),
        "scale": scale,
        "shift": shift,
        "unused": to_backend(np.zeros(1), backend),
    }


@settings(max_examples=25, deadline=None)
@given(MATRICES, FINITE, FINITE)
def test_bound_launch_equals_the_direct_launch(x, scale, shift):
    values = _values("cpu", x, scale, shift)
    bind(affine, values, backend="cpu", num_envs=x.shape[0])()
    direct = np.zeros_like(x)
    affine.launch("cpu", x.shape[0], x, direct, scale, shift)
    np.testing.assert_array_equal(values["out"], direct)


def _affine_then_sum(backend, x, scale, shift, fused):
    values = _values(backend, x, scale, shift)
    if fused:
        bind([affine, row_sum_into], values, backend=backend, num_envs=x.shape[0])()
    else:
        bind(affine, values, backend=backend, num_envs=x.shape[0])()
        bind(row_sum_into, values, backend=backend, num_envs=x.shape[0])()
    return to_numpy(values["out"]).copy(), to_numpy(values["totals"]).copy()


@settings(max_examples=20, deadline=None)
@given(MATRICES, FINITE, FINITE)
def test_a_fused_program_equals_the_kernels_launched_one_by_one(x, scale, shift):
    # the second body reads what the first wrote for the same env: per-env order holds
    for got, want in zip(
        _affine_then_sum("cpu", x, scale, shift, fused=True), _affine_then_sum("cpu", x, scale, shift, fused=False)
    ):
        np.testing.assert_array_equal(got, want)


@settings(max_examples=20, deadline=None)
@given(MATRICES, st.lists(st.booleans(), min_size=40, max_size=40), FINITE, FINITE)
def test_a_branch_runs_one_side_per_env(x, flags, scale, shift):
    mask = np.array(flags[: x.shape[0]])
    values = {**_values("cpu", x, scale, shift), "mask": mask}
    bind(
        [Branch("mask", then=[affine], otherwise=[negate_row]), row_sum_into],
        values,
        backend="cpu",
        num_envs=x.shape[0],
    )()
    expected = np.where(mask[:, None], x * scale + shift, -0.0 * x)
    np.testing.assert_array_equal(values["out"], expected)
    totals = np.ones(x.shape[0])
    for column in expected.T:  # the body's order of additions
        totals = totals + column
    np.testing.assert_array_equal(values["totals"], totals)


def test_an_unknown_name_is_refused_at_bind_time_naming_kernel_parameter_and_names():
    values = {"x": np.zeros((3, 2)), "out": np.zeros((3, 2)), "scale": 1.0}
    with pytest.raises(
        BindingError,
        match=r"affine: parameter 'shift' matches no available name; "
        r"available: \['out', 'scale', 'x'\]",
    ):
        bind(affine, values, backend="cpu", num_envs=3)
    with pytest.raises(BindingError, match=r"Branch\('flags'\): parameter 'flags' matches no available name"):
        bind(Branch("flags", then=[affine]), {**values, "shift": 0.0}, backend="cpu", num_envs=3)


def test_an_unknown_name_lists_the_users_names_before_the_internal_ones_and_suggests_the_closest():
    values = {
        "x": np.zeros((3, 2)),
        "out": np.zeros((3, 2)),
        "scale": 1.0,
        "shfit": 0.0,
        "_fault": np.zeros(1, np.int32),
        "_reset_mask": np.zeros(3, np.uint8),
    }
    with pytest.raises(BindingError) as error:
        bind(affine, values, backend="cpu", num_envs=3)
    message = str(error.value)
    assert "available: ['out', 'scale', 'shfit', 'x'], then the runtime's ['_fault', '_reset_mask']" in message
    assert message.index("'x'") < message.index("'_fault'")
    assert message.endswith("did you mean 'shfit'?")
    # no close name: no suggestion
    with pytest.raises(BindingError) as error:
        bind(affine, {"x": values["x"], "out": values["out"], "scale": 1.0}, backend="cpu", num_envs=3)
    assert "did you mean" not in str(error.value)


@settings(max_examples=25, deadline=None)
@given(rows=st.integers(0, 6), num_envs=st.integers(1, 8))
def test_too_few_rows_is_refused_before_anything_runs(rows, num_envs):
    x, out = np.ones((rows, 2)), np.zeros((rows, 2))
    values = {"x": x, "out": out, "scale": 2.0, "shift": 1.0}
    if rows >= num_envs:
        bind(affine, values, backend="cpu", num_envs=num_envs)()
        np.testing.assert_array_equal(out[:num_envs], 3.0)
        np.testing.assert_array_equal(out[num_envs:], 0.0)
        return
    with pytest.raises(
        ValueError,
        match=rf"value 'x': a per_env array needs at least num_envs rows "
        rf"\({num_envs},\), got shape \({rows}, 2\)",
    ):
        bind(affine, values, backend="cpu", num_envs=num_envs)
    np.testing.assert_array_equal(out, 0.0)


def test_per_agent_extents_and_shared_values():
    values = {"values": np.ones((2, 3)), "totals": np.zeros(2)}
    with pytest.raises(
        ValueError,
        match=r"value 'values': a per_agent array needs at least "
        r"\(num_envs, num_agents\) leading dims \(2, 4\), got shape \(2, 3\)",
    ):
        bind(agent_sum, values, backend="cpu", num_envs=2, num_agents=4, layouts={"values": "per_agent"})
    table = np.array([[2.0]])  # one row for every env: shared, not checked
    bind(
        affine,
        {"x": np.ones((3, 1)), "out": np.zeros((3, 1)), "scale": table[0, 0], "shift": 0.0},
        backend="cpu",
        num_envs=3,
    )()
    with pytest.raises(ValueError, match="layouts: expected kinds"):
        bind(affine, {}, backend="cpu", num_envs=1, layouts={"x": "per_planet"})


def test_values_the_backend_cannot_take_are_refused_with_their_name():
    with pytest.raises(TypeError, match="value 'x': backend 'cpu' expected a numpy array"):
        bind(affine, {"x": [1.0], "out": np.zeros((1, 1)), "scale": 1.0, "shift": 0.0}, backend="cpu", num_envs=1)


def test_one_launch_takes_one_layout_and_agent_kernels_need_num_agents():
    values = {
        "x": np.ones((2, 1)),
        "out": np.zeros((2, 1)),
        "scale": 1.0,
        "shift": 0.0,
        "totals": np.zeros(2),
        "visits": np.zeros((2, 3), np.int64),
        "per_agent": np.zeros((2, 3), np.int64),
    }
    with pytest.raises(BindingError, match="one launch runs kernels of one layout"):
        bind([affine, tally], values, backend="cpu", num_envs=2, num_agents=3)
    with pytest.raises(BindingError, match="an agent kernel needs num_agents"):
        bind(tally, values, backend="cpu", num_envs=2)


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 6), st.integers(1, 5))
def test_phases_run_as_separate_launches_in_order(num_envs, num_agents):
    values = {
        "totals": np.zeros(num_envs),
        "visits": np.zeros((num_envs, num_agents), np.int64),
        "per_agent": np.zeros((num_envs, num_agents), np.int64),
        "values": np.arange(num_envs * num_agents, dtype=np.float64).reshape(num_envs, num_agents),
    }
    launch = bind_launches(
        [tally, agent_sum],
        values,
        backend="cpu",
        num_envs=num_envs,
        num_agents=num_agents,
        layouts={"visits": "per_agent", "per_agent": "per_agent", "values": "per_agent"},
    )
    launch()
    expected = num_agents * (num_agents + 1) / 2 + values["values"].sum(axis=1)
    np.testing.assert_array_equal(values["totals"], expected)
    np.testing.assert_array_equal(values["visits"], 1)


def test_bound_values_are_aliased_not_copied():
    out = np.zeros((2, 1))
    launch = bind(affine, {"x": np.ones((2, 1)), "out": out, "scale": 1.0, "shift": 1.0}, backend="cpu", num_envs=2)
    launch()
    out[...] = 5.0
    launch()  # writes x * 1 + 1 into the same buffer again
    np.testing.assert_array_equal(out, 2.0)


@pytest.mark.sim
@settings(max_examples=5, deadline=None)
@given(hnp.arrays(np.float64, st.tuples(st.integers(1, 20), st.integers(1, 3)), elements=FINITE), FINITE, FINITE)
def test_fused_programs_are_bit_identical_on_cpu_and_sim(x, scale, shift):
    for got, want in zip(
        _affine_then_sum("sim", x, scale, shift, fused=True), _affine_then_sum("cpu", x, scale, shift, fused=True)
    ):
        np.testing.assert_array_equal(got, want)


@pytest.mark.sim
def test_sim_extent_check_and_branch():
    x = np.arange(6.0).reshape(3, 2)
    mask = np.array([True, False, True])
    values = {**_values("sim", x, 2.0, 1.0), "mask": to_backend(mask, "sim")}
    bind(Branch("mask", then=[affine], otherwise=[negate_row]), values, backend="sim", num_envs=3)()
    np.testing.assert_array_equal(to_numpy(values["out"]), np.where(mask[:, None], 2.0 * x + 1.0, 0.0))
    with pytest.raises(ValueError, match="value 'x': a per_env array needs at least num_envs rows"):
        bind(affine, values, backend="sim", num_envs=4)


@pytest.mark.sim
def test_sim_bindings_of_one_program_keep_their_own_launch_size():
    # the simulator's kernel[grid, block] configures the shared kernel object: a later
    # binding with another size must not shrink an earlier one's launch
    big = {
        "x": to_backend(np.ones((7, 1)), "sim"),
        "out": to_backend(np.zeros((7, 1)), "sim"),
        "scale": 2.0,
        "shift": 0.0,
    }
    small = {
        "x": to_backend(np.ones((1, 1)), "sim"),
        "out": to_backend(np.zeros((1, 1)), "sim"),
        "scale": 2.0,
        "shift": 0.0,
    }
    launch_big = bind(affine, big, backend="sim", num_envs=7)
    bind(affine, small, backend="sim", num_envs=1)()
    launch_big()
    np.testing.assert_array_equal(to_numpy(big["out"]), 2.0)


# ------------------------------------------------------------------ preconditions and per-call values
@env_kernel
def negative_index(i, x):
    """Fault code: env ``i`` when ``x[i]`` is negative."""
    if x[i] < 0:
        return i
    return -1


@env_kernel
def double_into(i, x, y):
    y[i] = 2 * x[i]


def _gated(backend, x, y):
    from kernelgym.core.binding import NO_FAULT, Precondition

    fault = to_backend(np.array([NO_FAULT], np.int64), backend)
    launch = bind(
        [Precondition(negative_index, "fault"), double_into],
        {"x": x, "y": y, "fault": fault},
        backend=backend,
        num_envs=x.shape[0],
        layouts={"fault": "shared"},
        per_call=("x",),
    )
    return launch, fault


@settings(max_examples=25, deadline=None)
@given(x=hnp.arrays(np.float64, st.integers(1, 40), elements=FINITE))
def test_a_cpu_precondition_runs_no_env_when_one_fails_and_keeps_the_smallest_code(x):
    from kernelgym.core.binding import NO_FAULT

    y = np.zeros_like(x)
    launch, fault = _gated("cpu", np.zeros_like(x), y)
    launch(x)  # the per-call value replaces the template
    bad = np.flatnonzero(x < 0)
    if bad.size:
        assert fault[0] == bad[0] and not y.any()
    else:
        assert fault[0] == NO_FAULT and np.array_equal(y, 2 * x)


@env_kernel
def keep_x(i, x, kept):
    kept[i] = x[i]


@settings(max_examples=25, deadline=None)
@given(x=hnp.arrays(np.float64, st.integers(1, 300), elements=FINITE), parallel=st.booleans())
def test_a_cpu_launch_returns_its_fault_and_records_every_failing_env(x, parallel):
    """Serial twin (few envs) or parallel launcher: the same fault, record and outputs."""
    from kernelgym.core import binding

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(binding, "PARALLEL_FROM", 1 if parallel else 10**9)
        _check_fault_return_and_record(binding, x)


def _check_fault_return_and_record(binding, x):
    y, kept = np.zeros_like(x), np.full_like(x, 7.0)
    fault = np.array([binding.NO_FAULT], np.int64)
    launch = bind(
        [binding.Precondition(negative_index, "fault", record=keep_x), double_into],
        {"x": np.zeros_like(x), "y": y, "kept": kept, "fault": fault},
        backend="cpu",
        num_envs=x.shape[0],
        layouts={"fault": "shared"},
        per_call=("x",),
    )
    returned = launch(x)
    bad = x < 0
    assert returned == fault[0] == (np.flatnonzero(bad)[0] if bad.any() else binding.NO_FAULT)
    assert np.array_equal(kept, np.where(bad, x, 7.0))  # only failing envs recorded
    assert np.array_equal(y, np.zeros_like(x) if bad.any() else 2 * x)


def test_cuda_launch_types_are_the_cpu_launch_types_unpacked():
    """A cpu launcher takes its bound arrays packed in one struct; the types `gpu_compile`
    builds the cuda launcher for are the values' own, in the cuda launcher's order."""
    import sys

    import numba

    from kernelgym.core import binding, gpu_compile

    x, kept = np.arange(4.0), np.zeros(4)
    values = {"x": np.zeros(4), "y": np.zeros(4), "kept": kept, "fault": np.array([binding.NO_FAULT], np.int64)}
    launch = bind(
        [binding.Precondition(negative_index, "fault", record=keep_x), double_into],
        values,
        backend="cpu",
        num_envs=4,
        layouts={"fault": "shared"},
        per_call=("x",),
    )
    launch(x)
    kept[...] = -1.0  # a bound array is the caller's, not a copy packed at bind time
    launch(-x - 1.0)
    assert np.array_equal(kept, -x - 1.0) and np.array_equal(values["y"], 2 * x)
    module = sys.modules[launch.as_function().func.py_func.__module__]
    expected = tuple(numba.typeof(value) for value in (4, *(values[name] for name in launch.names[:-1]), x))
    assert expected in gpu_compile.launched_signatures(module)  # other tests may launch it with other types


def test_per_call_values_come_last_and_need_a_template():
    y = np.zeros(3)
    launch = bind(double_into, {"x": np.zeros(3), "y": y}, backend="cpu", num_envs=3, per_call=("x",))
    assert launch.names[-1] == "x" and launch.per_call == ("x",)
    launch.as_function()(np.arange(3.0))
    assert np.array_equal(y, [0.0, 2.0, 4.0])
    with pytest.raises(BindingError, match="per_call"):
        bind(double_into, {"y": y}, backend="cpu", num_envs=3, per_call=("x",))


def test_scalar_values_compiled_in_as_constants_equal_passed_ones():
    x = np.linspace(-1.0, 1.0, 7)
    values = {"x": x, "out": np.zeros_like(x), "mask": np.ones(7, np.bool_), "scale": 0.1}
    bind(add_where, values, backend="cpu", num_envs=7)()
    assert np.array_equal(values["out"], np.float64(0.1) * x)  # bit for bit


def test_a_precondition_only_heads_a_program():
    from kernelgym.core.binding import NO_FAULT, Precondition

    values = {"x": np.zeros(2), "y": np.zeros(2), "fault": np.array([NO_FAULT])}
    with pytest.raises(BindingError, match="first item"):
        bind(
            [double_into, Precondition(negative_index, "fault")],
            values,
            backend="cpu",
            num_envs=2,
            layouts={"fault": "shared"},
        )
    with pytest.raises(BindingError, match="shared"):
        bind([Precondition(negative_index, "fault"), double_into], values, backend="cpu", num_envs=2)


@pytest.mark.sim
def test_a_device_precondition_skips_the_failing_envs_only_and_records_the_smallest_code():
    from numba import cuda

    x = np.array([1.0, -2.0, 3.0, -4.0, 5.0])
    y = cuda.to_device(np.zeros(5))
    launch, fault = _gated("sim", cuda.to_device(np.zeros(5)), y)
    launch(cuda.to_device(x))
    assert fault.copy_to_host()[0] == 1
    assert np.array_equal(y.copy_to_host(), [2.0, 0.0, 6.0, 0.0, 10.0])


@env_kernel
def scale_in_precision(i, x, out, scale, real):
    """Arithmetic in ``real``: a bare 0.1 would be float64 and promote it."""
    out[i] = real(x[i]) * scale + real(0.1)


PRECISION_INPUTS = hnp.arrays(np.float64, st.integers(1, 12), elements=FINITE)


def _scaled(backend, x, scale, real):
    values = {
        "x": to_backend(x, backend),
        "out": to_backend(np.zeros_like(x), backend),
        "scale": real(scale),
        "real": real,
    }
    bind(scale_in_precision, values, backend=backend, num_envs=x.shape[0])()
    return to_numpy(values["out"])


@settings(max_examples=25, deadline=None)
@given(PRECISION_INPUTS, FINITE)
def test_numpy_scalars_and_scalar_types_are_constants_of_their_own_type(x, scale):
    # float32 constants keep the arithmetic float32, float64 ones float64: bit for bit as numpy computes it
    for real in (np.float32, np.float64):
        want = (x.astype(real) * real(scale) + real(0.1)).astype(np.float64)
        assert _scaled("cpu", x, scale, real).tobytes() == want.tobytes()


@pytest.mark.sim
@settings(max_examples=5, deadline=None)
@given(PRECISION_INPUTS, FINITE)
def test_sim_scalar_type_constants_equal_the_cpu_ones(x, scale):
    for real in (np.float32, np.float64):
        assert _scaled("sim", x, scale, real).tobytes() == _scaled("cpu", x, scale, real).tobytes()


@given(
    st.one_of(
        st.floats(allow_nan=False, width=32).map(np.float32),
        st.floats(allow_nan=False).map(np.float64),
        st.integers(-(2**31), 2**31 - 1).map(np.int32),
        st.integers(0, 2**64 - 1).map(np.uint64),
        st.booleans().map(np.bool_),
        st.floats(allow_nan=False),
        st.integers(-(2**70), 2**70),
        st.booleans(),
        st.sampled_from([np.float32, np.float64, np.int64, np.uint8]),
    )
)
def test_a_constant_reads_back_exactly_with_its_type(value):
    from kernelgym.core import codegen

    assert codegen.is_constant(value)
    back = eval(codegen._literal(value), {"numpy": np})
    assert type(back) is type(value)
    if isinstance(value, type):
        assert back is value
    elif isinstance(value, np.generic):
        assert back.tobytes() == value.tobytes()
    else:
        assert repr(back) == repr(value)  # -0.0 included


def test_arrays_and_other_types_are_not_constants():
    from kernelgym.core import codegen

    assert not any(codegen.is_constant(value) for value in (np.zeros(2), np.ndarray, float, "x", None, 1j))


@env_kernel
def _plus_one(env, x, out):
    out[env] = x[env] + 1.0


@env_kernel
def _plus_two(env, x, out):
    out[env] = x[env] + 2.0


def test_programs_that_bind_the_same_fields_share_one_compiled_cpu_bind():
    # the struct of a program's bound arrays lives in a module named for its fields: a program
    # whose kernel changed (here, another kernel) packs with the build the first one compiled,
    # and a later process loads it from numba's cache rather than compiling it per program
    from kernelgym.core.gpu_compile import imported_launchers

    x = np.arange(4, dtype=np.float32)
    before = set(imported_launchers())
    outs, programs, signatures = [], [], []
    for kernel in (_plus_one, _plus_two):
        out = np.zeros(4, np.float32)
        bind(kernel, {"x": x, "out": out}, backend="cpu", num_envs=4)()
        (new,) = set(imported_launchers()) - before - {module.__name__ for module in programs}
        programs.append(imported_launchers()[new])
        outs.append(out)
        signatures.append(list(programs[-1].cpu_bind.signatures))
    np.testing.assert_array_equal(outs[0], x + 1)
    np.testing.assert_array_equal(outs[1], x + 2)
    first, second = programs
    assert first is not second and first.cpu_bind is second.cpu_bind
    assert first.cpu_bind.__module__ == second.cpu_bind.__module__ != first.__name__
    assert signatures[1] == signatures[0]  # the second program's bind compiled nothing new
