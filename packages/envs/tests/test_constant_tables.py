"""Constant tables: an array-valued params field is one read-only array shared by every env."""

import dataclasses

import numpy as np
import pytest
from gymnasium import spaces

from kernelgym.core import env_kernel
from kernelgym.envs import CPUReference, EnvSpec, StateArray
from kernelgym.envs.runtime.vector_env import KernelVectorEnv

TABLE = np.array([0.5, 1.5, 2.5, 3.5])


@dataclasses.dataclass(frozen=True)
class LookupParams:
    table: np.ndarray = dataclasses.field(default_factory=lambda: TABLE)


@env_kernel
def step(i, actions, obs, rewards, terminated, index, table):
    index[i] = (index[i] + actions[i]) % table.shape[0]
    rewards[i] = table[index[i]]
    terminated[i] = False
    obs[i, 0] = table[index[i]]


@env_kernel
def step_writes_the_table(i, actions, obs, rewards, terminated, index, table):
    table[0] = 9.0  # BUG: a constant table is read-only
    obs[i, 0] = table[index[i]]


@env_kernel
def reset(i, obs, index, table):
    index[i] = 0
    obs[i, 0] = table[0]


def _reference_step(params, state, action, rng_states):
    index = (int(state["index"]) + int(action)) % params.table.shape[0]
    return {"index": np.int64(index).reshape(())}, params.table[index], False


REFERENCE = CPUReference(
    lambda params, rng_states: {"index": np.int64(0).reshape(())},
    _reference_step,
    lambda params, state: np.array([params.table[int(state["index"])]], np.float32),
)


def _spec(step_kernel=step):
    return EnvSpec(
        id="Lookup-v0",
        observation_space=spaces.Box(-np.inf, np.inf, (1,), np.float32),
        action_space=spaces.Discrete(3),
        state=(StateArray("index", np.int64),),
        step_kernel=step_kernel,
        reset_kernel=reset,
        reference=REFERENCE,
        params=LookupParams(),
    )


def test_every_env_reads_the_one_table_and_make_can_swap_it():
    env = KernelVectorEnv(_spec(), 3, backend="cpu", seed=0)
    env.reset()
    _, rewards, *_ = env.step(np.array([0, 1, 2]), numpy=True)
    np.testing.assert_array_equal(rewards, [0.5, 1.5, 2.5])
    other = KernelVectorEnv(_spec(), 2, backend="cpu", seed=0, table=np.array([7.0, 8.0]))
    other.reset()
    np.testing.assert_array_equal(other.step(np.array([1, 2]), numpy=True)[1], [8.0, 7.0])
    assert not other.params.table.flags.writeable


def test_a_kernel_that_writes_a_table_does_not_compile_on_cpu():
    env = KernelVectorEnv(_spec(step_writes_the_table), 2, backend="cpu", seed=0)
    env.reset()
    with pytest.raises(Exception, match="(?i)readonly|read-only|Cannot modify"):
        env.step(np.zeros(2, np.int64))
    np.testing.assert_array_equal(TABLE, [0.5, 1.5, 2.5, 3.5])


@pytest.mark.parametrize(
    "value, error, message",
    [
        (np.array([[1.0]]), TypeError, "param 'table': expected ndarray"),
        (np.array([1.0, np.nan]), ValueError, "param 'table': expected finite values"),
        (1.0, TypeError, "param 'table': expected ndarray"),
    ],
)
def test_a_bad_table_is_refused_at_make(value, error, message):
    with pytest.raises(error, match=message):
        KernelVectorEnv(_spec(), 1, backend="cpu", table=value)


def test_a_table_of_objects_is_refused_by_the_spec():
    @dataclasses.dataclass(frozen=True)
    class Bad:
        table: np.ndarray = dataclasses.field(default_factory=lambda: np.array(["a"]))

    with pytest.raises(TypeError, match="a constant table must be a numpy array of numbers"):
        dataclasses.replace(_spec(), params=Bad())
