"""The ``agent_order`` check: order-dependent agent kernels, found on the cpu without a GPU.

On a GPU the agents of an env run concurrently, one thread each, and the envs in no
set order; the cpu twin runs them one after the other, in order. A kernel whose results
depend on that order races on a GPU, yet passes every in-order check: agents that draw
from one shared RNG stream (each gets the draws its turn gives it), a per-env value
several agents write without ``atomic_add`` (the last writer wins), an agent that reads
what another agent writes in the same phase.

The check runs each phase of the env's reset and step kernels (each its own launch, as
the runtime launches them) on the cpu twin from one drawn input: in order, then with the
envs in reverse order and the agents of every env in reversed and in random orders
(`kernelgym.core.binding.LaunchOrder`). Every result must be bitwise the in-order one:
each state array, ``obs``, ``rewards``, ``terminated`` and ``rng_states``. A failure
names the phase's kernel (its qualname), the arrays that differ, the first env where
they do and the order that showed it.

What no order shows: a read-modify-write of a shared value whose sequential result is
the same in every order (``count[env] += 1`` from several agents, without
``atomic_add``): the cpu twin never loses an update, a GPU does. Env-layout kernels (one
thread per env) have no agents to permute: the check passes them with a note (other
envs' rows are the ``no_cross_talk`` check's business).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given

from kernelgym.core.binding import LaunchOrder
from kernelgym.envs.runtime.names import bind_env_programs
from kernelgym.envs.testing import strategies
from kernelgym.envs.testing.harness import fail_on
from kernelgym.envs.testing.report import CheckSkipped

__all__ = ["check_agent_order", "order_problems"]

RANDOM_ORDERS = 3  # random agent orders per example, besides the reversed one
FIELDS = ("reset_kernel", "step_kernel")


def check_agent_order(harness, config) -> str | None:
    """Agent kernels give bitwise the same results in any order of an env's agents (and envs reversed)."""
    if harness.spec.kernel_layout != "agent":
        return ("env-layout kernels: one thread per env owns its rows and its RNG stream; "
                "no agents to run in another order")
    if harness.out_of_bounds_found:
        raise CheckSkipped("not run: the kernels write out of bounds, which corrupts memory on the cpu twin "
                           "this check runs; fix out_of_bounds first")
    batches = strategies.batches(harness.spec, harness.params, "cpu")

    @given(batch=batches, seed=strategies.seeds(), order_seed=strategies.seeds())
    def agent_order(batch, seed, order_seed):
        fail_on(order_problems(harness, batch, seed, order_seed),
                "order-dependent kernels (their agents race on a GPU)")

    config.run(agent_order)
    if harness.backend != "cpu":
        return f"ran on the cpu twin of the {harness.backend} kernels (one source)"
    return None


def order_problems(harness, batch, seed: int, order_seed: int) -> list[str]:
    """What differs from the in-order run when ``batch`` runs in permuted orders, one line per kernel.

    Parameters
    ----------
    harness : EnvHarness
        Of an agent-layout env.
    batch : strategies.Batch
        The state and actions every phase starts from (each field's first phase; later
        phases start from the in-order result of the one before).
    seed : int
        Seeds the RNG streams.
    order_seed : int
        Seeds the random agent orders.
    """
    num_envs, num_agents = batch.num_envs, harness.num_agents
    inputs = _inputs(harness, batch, seed)
    orders = _orders(num_envs, num_agents, np.random.default_rng(order_seed))
    launch_order = LaunchOrder(num_envs, num_agents)
    problems = []
    for field in FIELDS:
        kernels = harness.spec.load_kernels(field)
        current = inputs
        for number, kernel in enumerate(kernels, 1):
            arrays = {name: value.copy() for name, value in current.items()}
            launch = bind_env_programs(harness.spec, [[kernel]], arrays, "cpu", harness.params, harness.precision,
                                       order=launch_order)

            def run(env_order, agent_order):
                for name, value in current.items():
                    arrays[name][...] = value
                launch_order.set(env_order, agent_order)
                launch()
                return {name: value.copy() for name, value in arrays.items()}

            expected = run(None, None)
            for env_order, agent_order in orders:
                found = _differences(expected, run(env_order, agent_order))
                if found:
                    names, env = found
                    problems.append(
                        f"{kernel.__qualname__} ({field} phase {number} of {len(kernels)}): "
                        f"{', '.join(map(repr, names))} {'differs' if len(names) == 1 else 'differ'} from the "
                        f"in-order run, first in env {env}, "
                        f"when the envs ran in reverse order and env {env}'s agents in the order "
                        f"{agent_order[env].tolist()}")
                    break
            current = expected
    return problems


def _inputs(harness, batch, seed: int) -> dict[str, np.ndarray]:
    """Host buffers as the runtime's, by kernel name: the batch's state and actions, seeded streams."""
    num_envs = batch.num_envs
    agents = (harness.num_agents,)
    obs_space = harness.observation_space
    arrays = {
        "actions": np.array(batch.actions),
        "rng_states": harness.seed_streams(seed, num_envs),
        "obs": np.zeros((num_envs, *agents, *obs_space.shape), obs_space.dtype),
        "rewards": np.zeros((num_envs, *agents), np.float32),
        "terminated": np.zeros(num_envs, np.bool_),
    }
    return arrays | harness.stack_states(batch.states)


def _orders(num_envs: int, num_agents: int, generator) -> list[tuple[np.ndarray, np.ndarray]]:
    """(env order, agent orders): the envs reversed, each env's agents reversed, then at random."""
    envs = np.arange(num_envs)[::-1]
    agents = np.tile(np.arange(num_agents), (num_envs, 1))
    orders = [(envs, agents[:, ::-1])]
    orders += [(envs, generator.permuted(agents, axis=1)) for _ in range(RANDOM_ORDERS)]
    return orders


def _differences(expected: dict, got: dict):
    """(names of the arrays that differ bitwise, the first env where one does), or None."""
    names, envs = [], []
    for name, value in expected.items():
        # bitwise, per env: a NaN the in-order run also gives is no difference
        rows, other = (array.reshape(array.shape[0], -1).view(np.uint8) for array in (value, got[name]))
        differing = np.flatnonzero(np.any(rows != other, axis=1))
        if differing.size:
            names.append(name)
            envs.append(int(differing[0]))
    return (names, min(envs)) if names else None
