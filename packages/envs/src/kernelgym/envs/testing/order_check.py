"""The ``agent_order`` check: order-dependent agent kernels, found on the cpu without a GPU.

On a GPU the agents of an env run concurrently, one thread each, and the envs in no
set order; the cpu twin runs them one after the other, in order. A kernel whose results
depend on that order races on a GPU, yet passes every in-order check: agents that draw
from one shared RNG stream (each gets the draws its turn gives it), a per-env value
several agents write without ``atomic_add`` (the last writer wins), an agent that reads
what another agent writes in the same phase.

The check runs each phase of the env's reset and step kernels (each its own launch; the
runtime's fused launch runs the same phases with barriers between them) on the cpu twin
from one drawn input: in order, then with the envs in reverse order and the agents of
every env in reversed and in random orders (`kernelgym.core.binding.LaunchOrder`). Every
result must be bitwise the in-order one: each state array, ``obs``, ``rewards``, ``terminated`` and ``rng_states``.

No order shows a read-modify-write of a shared value whose sequential result is the same
in every order (``count[env] += 1`` from several agents, without ``atomic_add``): the
cpu twin never loses an update, a GPU does, when the agents all read before any of them
writes. So the check also runs that interleaving: each agent alone from the phase's
input, as if the others' writes came after its reads. An element an agent writes (not
through ``atomic_add``) must then hold what the in-order run gives; ``atomic_add`` is
told apart by a second run of the agent alone in which it adds nothing (a copy of the
kernel, and of the device functions it calls, with ``atomic_add`` replaced: a kernel
that reaches ``atomic_add`` under another name is not told apart). An element several
agents write with one value (``terminated[env] = runners_left[env] == 0``) is no race.

A failure names the phase's kernel (its qualname), the arrays that differ, the first
env where they do and the order or interleaving that showed it. Env-layout kernels (one
thread per env) have no agents to permute: the check passes them with a note (other
envs' rows are the ``no_cross_talk`` check's business).
"""

from __future__ import annotations

import types

import numpy as np
from hypothesis import given
from numba.core.registry import CPUDispatcher

from kernelgym.core import atomic_add, device_function
from kernelgym.core.binding import LaunchOrder
from kernelgym.core.kernels import AgentKernel
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
        return (
            "env-layout kernels: one thread per env owns its rows and its RNG stream; no agents to run in another order"
        )
    if harness.out_of_bounds_found:
        raise CheckSkipped(
            "not run: the kernels write out of bounds, which corrupts memory on the cpu twin "
            "this check runs; fix out_of_bounds first"
        )
    batches = strategies.batches(harness.spec, harness.params, "cpu")

    @given(batch=batches, seed=strategies.seeds(), order_seed=strategies.seeds())
    def agent_order(batch, seed, order_seed):
        fail_on(
            order_problems(harness, batch, seed, order_seed), "order-dependent kernels (their agents race on a GPU)"
        )

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
            launch = bind_env_programs(
                harness.spec, [[kernel]], arrays, "cpu", harness.params, harness.precision, order=launch_order
            )

            def run(env_order, agent_order, turns=None):
                for name, value in current.items():
                    arrays[name][...] = value
                launch_order.set(env_order, agent_order, turns)
                launch()
                return {name: value.copy() for name, value in arrays.items()}

            expected = run(None, None)
            where = f"{kernel.__qualname__} ({field} phase {number} of {len(kernels)})"
            for env_order, agent_order in orders:
                found = _differences(expected, run(env_order, agent_order))
                if found:
                    names, env = found
                    problems.append(
                        f"{where}: {', '.join(map(repr, names))} {'differs' if len(names) == 1 else 'differ'} from "
                        f"the in-order run, first in env {env}, when the envs ran in reverse order and env {env}'s "
                        f"agents in the order {agent_order[env].tolist()}"
                    )
                    break
            else:
                found = _interleaving_problem(harness, kernel, current, expected, launch_order, alone=run)
                if found:
                    problems.append(f"{where}: {found}")
            current = expected
    return problems


def _interleaving_problem(harness, kernel, inputs: dict, expected: dict, launch_order: LaunchOrder, alone):
    """What the in-order run ``expected`` gets wrong when every agent of an env reads before any writes."""
    num_envs, num_agents = launch_order.num_envs, launch_order.num_agents
    without_atomics = _without_atomics(kernel)
    if without_atomics is not None:
        arrays = {name: value.copy() for name, value in inputs.items()}
        launch = bind_env_programs(
            harness.spec, [[without_atomics]], arrays, "cpu", harness.params, harness.precision, order=launch_order
        )

        def alone_without_adds(env_order, agent_order, turns):
            for name, value in inputs.items():
                arrays[name][...] = value
            launch_order.set(env_order, agent_order, turns)
            launch()
            return {name: value.copy() for name, value in arrays.items()}

    rows = np.arange(num_agents)
    results, plain = [], []
    for agent in range(num_agents):
        # each env runs only this agent: first in every row, one turn
        order = np.tile(np.concatenate([[agent], np.delete(rows, agent)]), (num_envs, 1))
        results.append(alone(None, order, 1))
        plain.append(results[-1] if without_atomics is None else alone_without_adds(None, order, 1))
    launch_order.set()
    for name, value in expected.items():
        before, after = _bits(inputs[name]), _bits(value)
        alone_values = np.stack([_bits(result[name]) for result in results])
        writes = np.stack([_bits(result[name]) for result in plain]) != before  # not through atomic_add
        wrong = writes & (alone_values != after)
        # an element only atomic_add (or nothing) changes alone must not change otherwise
        unexplained = (after != before) & ~np.any(writes | (alone_values != before), axis=0)
        if np.any(wrong) or np.any(unexplained):
            index = tuple(int(i) for i in np.argwhere(np.any(wrong, axis=0) | unexplained)[0])
            every_kernel = (slice(None), *index)
            writers = np.flatnonzero(writes[every_kernel]).tolist()
            element = f"{name}[{', '.join(map(str, index))}]"
            if name == "rng_states" and len(writers) > 1:
                how = (
                    f"agents {writers} draw from one RNG stream (env {index[0]}'s row {index[1]}): each agent "
                    "must draw from its own, rng.agent_stream(env, agent, num_agents)"
                )
            elif len(writers) > 1:
                how = (
                    f"agents {writers} write it (not through atomic_add); each alone leaves "
                    f"{[_show(result[name][index]) for result in (results[a] for a in writers)]}, in order "
                    f"{_show(value[index])}: a lost update or a last writer that wins on a GPU"
                )
            elif writers:
                how = (
                    f"agent {writers[0]} alone leaves {_show(results[writers[0]][name][index])}, in order "
                    f"{_show(value[index])}: it depends on what other agents do in the same phase"
                )
            else:
                how = f"no agent alone changes it, in order it becomes {_show(value[index])}"
            return (
                f"{name!r} differs from the in-order run when the agents of env {index[0]} all read before "
                f"any of them writes (as a GPU may run them): {element}: {how}"
            )
    return None


@device_function
def _adds_nothing(array, index, value):
    """``atomic_add`` for an agent that runs alone: its update reaches nobody (it returns the old value)."""
    return array[index]


_WITHOUT_ATOMICS: dict = {}


def _without_atomics(kernel):
    """A copy of ``kernel`` in which ``atomic_add`` adds nothing (also in the device functions it
    calls), or None when the kernel never reaches it. Made once per kernel."""
    if kernel not in _WITHOUT_ATOMICS:
        function = _replace_atomics(kernel.py_func, {})
        if function is not None:
            # another qualname: another body key, so the copy never stands in for the kernel
            function.__qualname__ = f"{kernel.__qualname__}__without_atomic_add"
            function = AgentKernel(function)
        _WITHOUT_ATOMICS[kernel] = function
    return _WITHOUT_ATOMICS[kernel]


def _replace_atomics(function, done: dict):
    """``function`` with the globals it names that are (or reach) ``atomic_add`` replaced; None if none does."""
    if function in done:
        return done[function]
    done[function] = None  # recursion guard
    replaced = {}
    for name in function.__code__.co_names:
        value = function.__globals__.get(name)
        if value is atomic_add:
            replaced[name] = _adds_nothing
        elif isinstance(value, CPUDispatcher):
            helper = _replace_atomics(value.py_func, done)
            if helper is not None:
                replaced[name] = type(value)(helper, targetoptions=value.targetoptions)
    if not replaced:
        return None
    copy = types.FunctionType(
        function.__code__,
        {**function.__globals__, **replaced},
        function.__name__,
        function.__defaults__,
        function.__closure__,
    )
    copy.__qualname__, copy.__module__ = function.__qualname__, function.__module__
    done[function] = copy
    return copy


def _bits(value: np.ndarray) -> np.ndarray:
    """The elements of ``value`` as unsigned integers of their size (bitwise comparison, NaN included)."""
    return np.ascontiguousarray(value).view(f"u{value.dtype.itemsize}")


def _show(value) -> str:
    return np.array2string(np.asarray(value), separator=", ", threshold=8, precision=8)


def _inputs(harness, batch, seed: int) -> dict[str, np.ndarray]:
    """Host buffers as the runtime's, by kernel name: the batch's state and actions, seeded streams."""
    num_envs = batch.num_envs
    agents = (harness.num_agents,)
    arrays = {
        "actions": np.array(batch.actions),
        "rng_states": harness.seed_streams(seed, num_envs),
        **harness.obs_buffers(num_envs, agents),
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
