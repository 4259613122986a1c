"""Index forms the launch check proves or refuses (issue 36, class 2): constant columns against the
shape, writes at an offset or scaled env index and through a local alias refused naming the line."""

import inspect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgym.core import agent_kernel, bind, device_function, env_kernel


@env_kernel
def write_column_two(i, x):
    x[i, 2] = 1.0


@env_kernel
def write_previous(i, x):
    x[i - 1] = 1.0


@env_kernel
def write_next(i, x):
    x[i + 1] = 1.0


@env_kernel
def write_double(i, x):
    x[2 * i] = 1.0


@env_kernel
def write_alias(i, x):
    y = x
    y[i] = 1.0


@device_function
def put(x, j):
    x[j] = 1.0


@device_function
def put_before(x, j):
    x[j - 1] = 1.0


@env_kernel
def helper_at_next(i, x):
    put(x, i + 1)


@env_kernel
def helper_moves_it(i, x):
    put_before(x, i)


@env_kernel
def helper_at_own_row(i, x):
    put(x, i)


@device_function
def put_through(y, k):
    put_before(y, k)  # the write two helpers down


@device_function
def put_next_through(y, k):
    put(y, k + 1)


@env_kernel
def helper_of_helper_moves_it(i, x):
    put_through(x, i)


@env_kernel
def helper_of_helper_at_next(i, x):
    put_next_through(x, i)


@env_kernel
def helper_of_helper_at_own_row(i, x):
    put_through_own(x, i)


@device_function
def put_through_own(y, k):
    put(y, k)


@env_kernel
def write_next_through_local(i, x):
    j = i + 1
    x[j] = 1.0


@env_kernel
def write_through_two_locals(i, x):
    j = i
    k = j * 2
    x[k, 0] = 1.0


@env_kernel
def write_at_data_index(i, x, idx):
    j = idx[i]  # data: the check leaves it to the kernel, as x[idx[i]]
    x[i, 0] = j


@agent_kernel
def write_next_agent(env, agent, num_agents, x):
    x[env, agent + 1] = 1.0


@agent_kernel
def write_next_agent_through_local(env, agent, num_agents, x):
    other = agent + 1
    x[env, other] = 1.0


@agent_kernel
def write_own_agent(env, agent, num_agents, x):
    x[env, agent] = 1.0


@env_kernel
def read_previous(i, x, out):
    out[i] = x[i - 1] if i > 0 else 0.0


def test_a_constant_column_past_the_shape_is_refused_on_every_path():
    x = np.zeros((4, 2))
    with pytest.raises(
        ValueError, match=r"expected dim 1 of at least 3 \(the kernel indexes it at 2\), got shape \(4, 2\)"
    ):
        write_column_two.launch("cpu", 4, x)
    with pytest.raises(ValueError, match=r"value 'x': expected dim 1 of at least 3"):
        bind(write_column_two, {"x": x}, backend="cpu", num_envs=4)
    assert not x.any()
    wide = np.zeros((4, 3))
    write_column_two.launch("cpu", 4, wide)
    assert (wide[:, 2] == 1.0).all() and not wide[:, :2].any()


@pytest.mark.parametrize(
    "kernel, text, how",
    [
        (write_previous, "x[i - 1]", "at an offset or scaled env index"),
        (write_next, "x[i + 1]", "at an offset or scaled env index"),
        (write_double, "x[2 * i]", "at an offset or scaled env index"),
        (write_alias, "y[i]", "through the local name 'y'"),
    ],
)
def test_a_write_the_check_cannot_prove_is_refused_naming_the_line(kernel, text, how):
    x = np.zeros(8)
    lines, first = inspect.getsourcelines(kernel.py_func)
    line = first + next(n for n, source in enumerate(lines) if text in source)
    for attempt in (lambda: kernel.launch("cpu", 4, x), lambda: bind(kernel, {"x": x}, backend="cpu", num_envs=4)):
        with pytest.raises(ValueError) as refused:
            attempt()
        message = str(refused.value)
        assert f"{kernel.__qualname__} (" in message and f":{line})" in message
        assert f"`{text}` writes 'x' {how}" in message and "x[i, ...]" in message
    assert not x.any()


@pytest.mark.parametrize(
    "kernel, text, helper",
    [(helper_at_next, "put(x, i + 1)", "put"), (helper_moves_it, "put_before(x, i)", "put_before")],
)
def test_an_env_index_moved_on_its_way_through_a_device_function_is_refused(kernel, text, helper):
    x = np.zeros(8)
    with pytest.raises(ValueError) as refused:
        kernel.launch("cpu", 4, x)
    message = str(refused.value)
    assert f"`{text}` writes 'x' in {helper} at an offset or scaled env index" in message
    assert not x.any()
    helper_at_own_row.launch("cpu", 4, x)  # the env's own row through a helper is proven
    assert x.tolist() == [1.0] * 4 + [0.0] * 4


def test_a_read_at_an_offset_stays_allowed():
    x, out = np.arange(4.0), np.zeros(4)
    read_previous.launch("cpu", 4, x, out)
    assert out.tolist() == [0.0, 0.0, 1.0, 2.0]


@settings(max_examples=10, deadline=None)
@given(columns=st.integers(1, 4), envs=st.integers(1, 6))
def test_fuzz_a_constant_column_is_written_exactly_when_the_shape_holds_it(columns, envs):
    x = np.zeros((envs, columns))
    if columns > 2:
        write_column_two.launch("cpu", envs, x)
        assert (x[:, 2] == 1.0).all() and x.sum() == envs
    else:
        with pytest.raises(ValueError, match="expected dim 1 of at least 3"):
            write_column_two.launch("cpu", envs, x)
        assert not x.any()


def _line_of(kernel, text: str) -> int:
    lines, first = inspect.getsourcelines(kernel.py_func)
    return first + next(n for n, source in enumerate(lines) if text in source)


@pytest.mark.parametrize(
    "kernel, text, helpers",
    [
        (helper_of_helper_moves_it, "put_through(x, i)", "put_through -> put_before"),
        (helper_of_helper_at_next, "put_next_through(x, i)", "put_next_through -> put"),
    ],
)
def test_a_write_two_helpers_down_at_a_moved_env_index_is_refused_naming_the_call(kernel, text, helpers):
    x = np.zeros(8)
    for attempt in (lambda: kernel.launch("cpu", 4, x), lambda: bind(kernel, {"x": x}, backend="cpu", num_envs=4)):
        with pytest.raises(ValueError) as refused:
            attempt()
        message = str(refused.value)
        assert f":{_line_of(kernel, text)})" in message, message
        assert f"`{text}` writes 'x' in {helpers} at an offset or scaled env index" in message, message
        assert "x[i, ...]" in message, message
    assert not x.any()
    helper_of_helper_at_own_row.launch("cpu", 4, x)  # the own row two helpers down is proven
    assert x.tolist() == [1.0] * 4 + [0.0] * 4


@pytest.mark.parametrize(
    "kernel, text, local",
    [(write_next_through_local, "x[j]", "`j = i + 1`"), (write_through_two_locals, "x[k, 0]", "`k = j * 2`")],
)
def test_a_write_at_a_local_computed_from_the_env_index_is_refused_naming_the_line(kernel, text, local):
    x = np.zeros((8, 1))
    for attempt in (lambda: kernel.launch("cpu", 4, x), lambda: bind(kernel, {"x": x}, backend="cpu", num_envs=4)):
        with pytest.raises(ValueError) as refused:
            attempt()
        message = str(refused.value)
        assert f"{kernel.__qualname__} (" in message and f":{_line_of(kernel, text)})" in message, message
        assert f"`{text}` writes 'x' at an index computed from the env index ({local})" in message, message
    assert not x.any()


def test_a_local_read_from_data_is_left_to_the_kernel():
    x, idx = np.zeros((4, 1)), np.array([3, 2, 1, 0])
    write_at_data_index.launch("cpu", 4, x, idx)
    assert x[:, 0].tolist() == [3.0, 2.0, 1.0, 0.0]


@pytest.mark.parametrize(
    "kernel, text, how",
    [
        (write_next_agent, "x[env, agent + 1]", "at an offset or scaled agent index"),
        (
            write_next_agent_through_local,
            "x[env, other]",
            "at an index computed from the agent index (`other = agent + 1`)",
        ),
    ],
)
def test_a_write_at_a_moved_agent_index_is_refused_naming_the_line(kernel, text, how):
    x = np.zeros((2, 3))
    with pytest.raises(ValueError) as refused:
        kernel.launch("cpu", 2, 3, x)
    message = str(refused.value)
    assert f"{kernel.__qualname__} (" in message and f":{_line_of(kernel, text)})" in message, message
    assert f"`{text}` writes 'x' {how}" in message, message
    assert not x.any()
    write_own_agent.launch("cpu", 2, 3, x)  # the agent's own column is proven
    assert (x == 1.0).all()
