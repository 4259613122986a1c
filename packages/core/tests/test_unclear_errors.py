"""Errors that name the argument, the expected and the received value (issue 36, class 7), and an
agent kernel whose source cannot be read, checked per (env, agent) from the layout (class 2)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgym.core import launch_fit


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"threads_per_block": 2.5}, TypeError, "threads_per_block: expected an int, got float 2.5"),
        ({"registers_per_thread": float("nan")}, TypeError, "registers_per_thread: expected an int, got float nan"),
        ({"threads_per_block": True}, TypeError, "threads_per_block: expected an int, got bool True"),
        ({"shared_bytes": -1}, ValueError, "shared_bytes: expected an int >= 0, got -1"),
        ({"grid": (1, 0, 1)}, ValueError, "grid y: expected an int >= 1, got 0"),
    ],
)
def test_launch_fit_refuses_a_count_that_is_no_count(kwargs, error, message):
    arguments = {"registers_per_thread": 32, "threads_per_block": 128} | kwargs
    with pytest.raises(error, match=message):
        launch_fit.launch_fit("sm_90", **arguments)


@settings(max_examples=20, deadline=None)
@given(agents=st.integers(1, 5000), cap=st.integers(-2, 2**17))
def test_fuzz_agent_block_packs_or_names_the_cap(agents, cap):
    if 1 <= cap <= 1024:
        envs, per_env = launch_fit.agent_block(agents, cap)
        assert per_env == min(agents, cap) and 1 <= envs * per_env <= cap
    else:
        with pytest.raises(ValueError, match=rf"cap: expected an int in \[1, 1024\], got {cap}"):
            launch_fit.agent_block(agents, cap)


def test_a_kernel_exec_defined_without_a_module_name_is_refused_naming_it():
    namespace = {}
    source = "from kernelgym.core import env_kernel\n@env_kernel\ndef stamp(i, x):\n    x[i] = 1.0\n"
    with pytest.raises(
        TypeError, match=r"env_kernel 'stamp': expected a function with a module name .*got __module__ None"
    ):
        exec(compile(source, "<prompt>", "exec"), namespace)


def test_an_agent_kernel_whose_source_cannot_be_read_has_its_agent_dim_checked():
    """Typed at a prompt: the body is unproven, so every array needs (num_envs, num_agents) rows."""
    from kernelgym.core import agent_kernel
    from kernelgym.core.extents import body_access

    namespace = {"__name__": "prompt"}
    exec(compile("def fill(env, agent, num_agents, x):\n    x[env, agent] = 1.0\n", "<prompt>", "exec"), namespace)
    fill = agent_kernel(namespace["fill"])
    assert not body_access(fill).known
    x = np.zeros((4, 2))
    with pytest.raises(ValueError, match=r"'x'.*\(4, 200000\)"):
        fill.launch("cpu", 4, 200000, x)
    assert not x.any()
    fill.launch("cpu", 4, 2, x)
    assert (x == 1.0).all()
