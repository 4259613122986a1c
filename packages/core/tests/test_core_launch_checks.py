"""Issue 25 (classes 2 and 10): what every launch path checks before any kernel runs.

Each test here crashed the process, wrote another env's row, or raised Numba's typing
dump (or an allocator message naming nothing) before the checks in
`kernelgym.core.extents`. Only kernels of `core_test_kernels` run, with the dtypes other
tests compile them for.
"""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from core_test_kernels import affine, stamp, tally
from kernelgym.core import CUDADataManager, DataFeed, bind
from kernelgym.core.arrays import byte_view
from kernelgym.core.extents import body_access, check_no_overlap


def _affine_values(rows=4, out=None):
    return {"x": np.ones((rows, 2)), "out": np.zeros((rows, 2)) if out is None else out, "scale": 2.0, "shift": 0.5}


@settings(max_examples=15, deadline=None)
@given(rows=st.integers(0, 6), extra=st.integers(1, 3), which=st.sampled_from(["x", "out"]))
def test_every_launch_path_refuses_num_envs_beyond_the_rows_naming_the_array(rows, extra, which):
    values = _affine_values(rows + extra)
    values[which] = values[which][:rows]
    with pytest.raises(ValueError, match=f"'{which}': expected at least num_envs rows"):
        affine.launch("cpu", rows + extra, values["x"], values["out"], 2.0, 0.5)
    with pytest.raises(ValueError, match=f"value '{which}'"):
        bind(affine, values, backend="cpu", num_envs=rows + extra)


def test_an_agent_kernel_knows_its_per_agent_arrays_without_a_layout_hint():
    """3 agents over an (8, 2) array: env 0's third agent would write env 1's row."""
    totals, visits, per_agent = np.zeros(8), np.zeros((8, 2), np.int64), np.zeros((8, 3), np.int64)
    assert body_access(tally).layouts == {"totals": "per_env", "visits": "per_agent", "per_agent": "per_agent"}
    with pytest.raises(ValueError, match=r"value 'visits': expected at least \(num_envs, num_agents\)"):
        bind(
            tally,
            {"totals": totals, "visits": visits, "per_agent": per_agent},
            backend="cpu",
            num_envs=8,
            num_agents=3,
            layouts={"visits": "shared"},
        )
    with pytest.raises(ValueError, match="'visits'"):
        tally.launch("cpu", 8, 3, totals, visits, per_agent)
    assert not visits.any()


def test_a_body_whose_source_cannot_be_read_has_every_array_checked_as_per_env():
    """A body typed at a prompt (no source file): its arrays are taken as per env and written."""
    from kernelgym.core import env_kernel

    namespace = {"__name__": "prompt"}
    exec(compile("def bump(i, x, table):\n    x[i] += table[0]\n", "<prompt>", "exec"), namespace)
    bump = env_kernel(namespace["bump"])
    assert not body_access(bump).known
    with pytest.raises(ValueError, match="argument 1 'table': expected at least num_envs rows"):
        bump.launch("cpu", 4, np.zeros(4), np.ones(1))


def test_a_loop_over_one_array_bounds_the_other_and_a_constant_leading_index_needs_its_row():
    x, out = np.ones((4, 3)), np.zeros((4, 2))  # affine loops over x.shape[1] to write out[i, j]
    with pytest.raises(ValueError, match=r"'out': expected dim 1 >= dim 1 of argument 0 'x' \(3"):
        affine.launch("cpu", 4, x, out, 1.0, 0.0)
    with pytest.raises(ValueError, match=r"value 'clock': expected dim 0 of at least 1"):
        bind(
            stamp,
            {"clock": np.zeros(0, np.int64), "when": np.zeros(4, np.int64)},
            backend="cpu",
            num_envs=4,
            layouts={"clock": "shared"},
        )
    stamp.launch("cpu", 0, np.zeros(0, np.int64), np.zeros(0, np.int64))  # no env: nothing indexed


@pytest.mark.parametrize("how", ["launch", "bind"])
def test_written_arrays_that_share_rows_across_envs_are_refused_naming_both(how):
    a = np.zeros((5, 2))
    with pytest.raises(ValueError, match="'x'.* and .*'out'.*share memory"):
        if how == "launch":
            affine.launch("cpu", 4, a[1:], a[:-1], 2.0, 0.5)
        else:
            bind(affine, _affine_values(out=a[:-1]) | {"x": a[1:]}, backend="cpu", num_envs=4)


def test_the_same_rows_under_two_names_are_not_a_race():
    a = np.arange(8.0).reshape(4, 2)
    affine.launch("cpu", 4, a, a, 2.0, 0.5)  # each env reads and writes its own row
    np.testing.assert_array_equal(a, np.arange(8.0).reshape(4, 2) * 2.0 + 0.5)
    # a byte view, or overlapping column ranges, hold each env's memory in its own row too
    state = np.zeros((4, 3))
    check_no_overlap({"state": state, "raw": byte_view(state, (4,))}, {"state", "raw"})
    check_no_overlap({"left": state[:, :2], "right": state[:, 1:]}, {"left"})
    with pytest.raises(ValueError, match="left and right"):
        check_no_overlap({"left": state[:-1], "right": state[1:]}, {"left"})
    check_no_overlap({"left": state[:-1], "right": state[1:]}, set())  # read only: no race


def test_a_tensor_re_pointed_after_bind_is_refused_at_launch():
    out = torch.zeros(4, 2, dtype=torch.float64)
    launch = bind(affine, _affine_values(out=out), backend="cpu", num_envs=4)
    launch()
    assert (out == 2.5).all()
    out.set_(torch.zeros(4, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="value 'out': the tensor was re-pointed after bind"):
        launch()
    with pytest.raises(ValueError, match="value 'out'"):
        launch.as_function()()
    assert not out.any()


def test_a_per_call_array_with_too_few_rows_is_refused_at_each_launch():
    out = np.zeros((4, 2))
    launch = bind(affine, _affine_values(out=out), backend="cpu", num_envs=4, per_call=("x",))
    for call in (launch, launch.as_function()):
        with pytest.raises(ValueError, match=r"per-call value 'x': expected an array of at least \(4,\)"):
            call(np.ones((3, 2)))
        call(np.ones((4, 2)))
    assert (out == 2.5).all()


@pytest.mark.parametrize(
    "value, error, message",
    [
        (np.ones((4, 2), ">f8"), TypeError, "value 'x': expected native byte order"),
        (np.ones((4, 2), np.longdouble), TypeError, "value 'x': expected one of the dtypes"),
        (torch.ones(4, 2, dtype=torch.bfloat16), TypeError, "value 'x'.*bfloat16"),
        (torch.ones(4, 2, dtype=torch.float64, device="meta"), TypeError, "value 'x'.*meta tensor"),
    ],
    ids=["big-endian", "float128", "bfloat16", "meta"],
)
def test_arrays_no_kernel_can_take_are_named_at_bind(value, error, message):
    with pytest.raises(error, match=message):
        bind(affine, _affine_values() | {"x": value}, backend="cpu", num_envs=4)


def _read_only(array):
    array.flags.writeable = False
    return array


@pytest.mark.parametrize(
    "out, message",
    [
        (np.zeros((4, 2))[...].view(), None),
        (_read_only(np.zeros((4, 2))), "'out': the kernel writes it, so it must be writable"),
        (np.broadcast_to(np.zeros(2), (4, 2)), "'out': the kernel writes it"),
        (np.lib.stride_tricks.as_strided(np.zeros(2), (4, 2), (0, 8)), "'out': the kernel writes it, got a broadcast"),
    ],
    ids=["writable", "read-only", "read-only-broadcast", "writable-broadcast"],
)
def test_written_arrays_must_be_writable_and_not_broadcast(out, message):
    if message is None:
        bind(affine, _affine_values(out=out), backend="cpu", num_envs=4)()
        assert (out == 2.5).all()
        return
    # a read-only one is refused at the first launch, where Numba refused it before
    with pytest.raises((TypeError, ValueError), match="value " + message):
        bind(affine, _affine_values(out=out), backend="cpu", num_envs=4)()
    with pytest.raises((TypeError, ValueError), match="argument 1 " + message):
        affine.launch("cpu", 4, np.ones((4, 2)), out, 2.0, 0.5)
    assert not out.any()


@pytest.mark.parametrize("scale", [2**64, -(2**63) - 1, np.longdouble(2.0)])
def test_scalars_numba_cannot_type_are_named(scale):
    with pytest.raises((ValueError, TypeError), match="value 'scale'"):
        bind(affine, _affine_values() | {"scale": scale}, backend="cpu", num_envs=4)


@pytest.mark.parametrize("num_envs", [2**63, 2**64])
def test_a_count_beyond_int64_is_named(num_envs):
    with pytest.raises(ValueError, match="num_envs: expected an int <= 9223372036854775807"):
        bind(affine, _affine_values(), backend="cpu", num_envs=num_envs)
    with pytest.raises(ValueError, match="num_envs"):
        affine.launch("cpu", num_envs, np.ones((4, 2)), np.zeros((4, 2)), 1.0, 0.0)


def test_absurd_data_shapes_name_the_data_not_numpy_internals():
    dm = CUDADataManager(num_envs=3, episode_length=2**62, backend="cpu")
    feed = DataFeed()
    feed.add_data("y", np.zeros((3, 4)), log_data_across_episode=True)
    with pytest.raises(MemoryError, match="y_for_log: cannot allocate .* more than an address space holds"):
        dm.push_data_to_device(feed)
    with pytest.raises(MemoryError, match="num_envs: cannot allocate"):
        CUDADataManager(num_envs=2**62, backend="cpu")


@pytest.mark.sim
def test_the_simulator_checks_device_arrays_alike():
    """The kernels the GPU runs: rows, per-agent columns and shared rows of device arrays."""
    from kernelgym.core.arrays import to_backend

    x, out = to_backend(np.ones((4, 2)), "sim"), to_backend(np.zeros((3, 2)), "sim")
    with pytest.raises(ValueError, match="argument 1 'out': expected at least num_envs rows"):
        affine.launch("sim", 4, x, out, 2.0, 0.5)
    with pytest.raises(ValueError, match="value 'out'"):
        bind(affine, {"x": x, "out": out, "scale": 2.0, "shift": 0.5}, backend="sim", num_envs=4)
    visits = to_backend(np.zeros((8, 2), np.int64), "sim")
    with pytest.raises(ValueError, match="'visits'"):
        tally.launch("sim", 8, 3, to_backend(np.zeros(8), "sim"), visits, to_backend(np.zeros((8, 3), np.int64), "sim"))
    shared = to_backend(np.zeros((5, 2)), "sim")
    with pytest.raises(ValueError, match="share memory"):
        affine.launch("sim", 4, shared[1:], shared[:4], 2.0, 0.5)
