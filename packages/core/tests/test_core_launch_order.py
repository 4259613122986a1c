"""A LaunchOrder runs a bound cpu program's envs and agents in a given order (the kit's order check)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core_test_kernels import affine, stamp, take_turns, tally
from kernelgym.core import BindingError, bind, env_kernel
from kernelgym.core.binding import LaunchOrder, Precondition


@st.composite
def orders(draw, max_envs=6, max_agents=5):
    num_envs, num_agents = draw(st.integers(1, max_envs)), draw(st.integers(1, max_agents))
    env_order = np.array(draw(st.permutations(range(num_envs))), np.int64)
    agent_order = np.array([draw(st.permutations(range(num_agents))) for _ in range(num_envs)], np.int64)
    return num_envs, num_agents, env_order, agent_order


@settings(max_examples=25, deadline=None)
@given(orders())
def test_agents_and_envs_run_in_the_order_given(order):
    num_envs, num_agents, env_order, agent_order = order
    counter, turn = np.zeros(num_envs, np.int64), np.full((num_envs, num_agents), -1, np.int64)
    launch_order = LaunchOrder(num_envs, num_agents)
    launch = bind(
        take_turns,
        {"counter": counter, "turn": turn},
        backend="cpu",
        num_envs=num_envs,
        num_agents=num_agents,
        layouts={"turn": "per_agent"},
        order=launch_order,
    )
    launch()  # in order: agent a of every env ran a-th
    np.testing.assert_array_equal(turn, np.tile(np.arange(num_agents), (num_envs, 1)))
    counter[:] = 0
    launch_order.set(env_order, agent_order)  # in place: the bound launch sees it
    launch()
    for env in range(num_envs):
        np.testing.assert_array_equal(turn[env, agent_order[env]], np.arange(num_agents))
    counter[:] = 0
    turn[:] = -1
    launch_order.set(env_order, agent_order, turns=1)  # only the first agent of each row runs
    launch()
    np.testing.assert_array_equal(counter, np.ones(num_envs))
    for env in range(num_envs):
        assert turn[env, agent_order[env, 0]] == 0 and np.sum(turn[env] >= 0) == 1
    clock, when = np.zeros(1, np.int64), np.full(num_envs, -1, np.int64)
    envs_order = LaunchOrder(num_envs)
    envs_order.set(env_order)
    bind(
        stamp,
        {"clock": clock, "when": when},
        backend="cpu",
        num_envs=num_envs,
        layouts={"clock": "shared"},
        order=envs_order,
    )()
    np.testing.assert_array_equal(when[env_order], np.arange(num_envs))


@settings(max_examples=20, deadline=None)
@given(orders(), st.integers(0, 2**32))
def test_an_order_independent_program_gives_the_same_bits_in_every_order(order, seed):
    num_envs, num_agents, env_order, agent_order = order
    generator = np.random.default_rng(seed)
    x = generator.normal(size=(num_envs, 3))

    def run(launch_order):
        totals, visits = np.zeros(num_envs), np.zeros((num_envs, num_agents), np.int64)
        per_agent = np.zeros((num_envs, num_agents), np.int64)
        values = {"totals": totals, "visits": visits, "per_agent": per_agent}
        bind(
            tally,
            values,
            backend="cpu",
            num_envs=num_envs,
            num_agents=num_agents,
            layouts={"visits": "per_agent", "per_agent": "per_agent"},
            order=launch_order,
        )()
        out = np.zeros_like(x)
        affine_order = None if launch_order is None else LaunchOrder(num_envs)
        if affine_order is not None:
            affine_order.set(launch_order.env_order)
        bind(
            affine,
            {"x": x, "out": out, "scale": 2.0, "shift": 1.0},
            backend="cpu",
            num_envs=num_envs,
            order=affine_order,
        )()
        return totals, visits, per_agent, out

    permuted = LaunchOrder(num_envs, num_agents)
    permuted.set(env_order, agent_order)
    for expected, got in zip(run(None), run(permuted)):  # the hot-path launch, then the permuted one
        np.testing.assert_array_equal(got, expected)


def test_launch_orders_are_checked_before_anything_runs():
    order = LaunchOrder(3, 2)
    with pytest.raises(ValueError, match=r"env_order: expected a permutation of range\(3\)"):
        order.set([0, 0, 1])
    with pytest.raises(ValueError, match=r"agent_order: expected 3 rows, each a permutation of range\(2\)"):
        order.set(None, [[0, 1], [1, 1], [1, 0]])
    with pytest.raises(ValueError, match="agent_order"):
        order.set(None, [0, 1])
    with pytest.raises(ValueError, match=r"turns: expected None or an int in \[0, 2\], got 3"):
        order.set(None, None, turns=3)
    np.testing.assert_array_equal(order.agent_order, [[0, 1]] * 3)  # a refused order changes nothing
    values = {"counter": np.zeros(3, np.int64), "turn": np.zeros((3, 2), np.int64)}
    with pytest.raises(ValueError, match="order: expected a LaunchOrder of num_envs=4, got 3"):
        bind(
            take_turns,
            values | {"counter": np.zeros(4, np.int64), "turn": np.zeros((4, 2), np.int64)},
            backend="cpu",
            num_envs=4,
            num_agents=2,
            order=order,
        )
    with pytest.raises(ValueError, match="order: expected a LaunchOrder of num_agents=3"):
        bind(
            take_turns,
            {"counter": np.zeros(3, np.int64), "turn": np.zeros((3, 3), np.int64)},
            backend="cpu",
            num_envs=3,
            num_agents=3,
            order=order,
        )
    with pytest.raises(TypeError, match="order: expected None or a LaunchOrder, got list"):
        bind(take_turns, values, backend="cpu", num_envs=3, num_agents=2, order=[0, 1, 2])


@env_kernel
def never_fails(i, x):
    return -1


def test_a_program_with_a_precondition_has_no_permuted_launch():
    values = {"x": np.zeros(2), "fault": np.zeros(1, np.int64)}
    with pytest.raises(BindingError, match="starts with a Precondition"):
        bind(
            [Precondition(never_fails, "fault"), stamp],
            values | {"clock": np.zeros(1, np.int64), "when": np.zeros(2, np.int64)},
            backend="cpu",
            num_envs=2,
            layouts={"fault": "shared", "clock": "shared"},
            order=LaunchOrder(2),
        )
