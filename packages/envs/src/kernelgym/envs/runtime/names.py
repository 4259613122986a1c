"""The names env kernels bind to: the runtime's buffers, the state arrays, the params.

An env kernel's body names what it uses after its layout parameters (``i``, or
``env, agent, num_agents``), in any order and any subset:

- ``actions``, ``obs``, ``rewards``, ``terminated``, ``rng_states``: the runtime's
  buffers (`RUNTIME_NAMES`); for a ``Dict``/``Tuple`` observation space one buffer per
  leaf, ``obs_<key>`` (`kernelgym.envs.observations`), in place of ``obs``;
- each `StateArray` by its name;
- each params field by its field name: a scalar (the env's entry of the per-env table
  for `EnvSpec.per_env_params` fields), or, for an array-valued field (a constant table
  such as a maze layout), one read-only array shared by every env (cpu: a non-writeable
  numpy array, so numba refuses a kernel that writes it at compile time);
- ``real``: the scalar type of the env's arithmetic (``numpy.float64`` or
  ``numpy.float32``) for an env that declares `EnvSpec.precisions`; its float params
  are bound as ``real`` scalars then.

They are matched once, when the env is made (`kernelgym.core.binding.bind`); a name
that matches nothing is an error naming the kernel, the parameter and these names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from kernelgym.core import bind_launches
from kernelgym.core.arrays import to_backend
from kernelgym.envs.observations import is_structured, leaves
from kernelgym.envs.runtime.streams import stream_table
from kernelgym.envs.spec import PRECISIONS, resolve_precision

__all__ = ["RUNTIME_NAMES", "bind_env_programs", "check_names", "kernel_values", "per_agent_layouts"]

# What the runtime offers env kernels, and what each holds.
RUNTIME_NAMES = {
    "actions": "(num_envs, [num_agents,] *action_shape) this step's actions (read only)",
    "obs": "(num_envs, [num_agents,] *obs_shape) observations the kernel writes (a Box observation space)",
    "obs_<key>": "(num_envs, [num_agents,] *leaf_shape) one leaf of a Dict/Tuple observation space, by key path "
    "(obs_<outer>_<inner>, obs_<index> for Tuple items)",
    "rewards": "(num_envs[, num_agents]) float32 rewards the step kernel writes",
    "terminated": "(num_envs,) bool, set by the step kernel when the episode ends",
    "rng_states": "uint64 stream table, (num_envs, 2): env i draws from stream i with kernelgym.core.rng; "
    "agent-layout envs (num_envs * num_agents, 2): agent a of env i draws from stream "
    "rng.agent_stream(i, a, num_agents) = i * num_agents + a",
    "real": "numpy.float64 or numpy.float32, the env's precision (envs declaring EnvSpec.precisions)",
}


def check_names(spec) -> None:
    """State array and params field names must differ from each other and the runtime's names."""
    fields = [field.name for field in dataclasses.fields(spec.params)] if spec.params is not None else []
    taken = {name: "runtime buffer" for name in (*RUNTIME_NAMES, *observation_names(spec.resolve().observation_space))}
    for kind, names in (("state array", [array.name for array in spec.state]), ("params field", fields)):
        for name in names:
            if name in taken or name.startswith("_"):
                clash = taken.get(name, "the runtime's own names start with '_'")
                raise ValueError(
                    f"EnvSpec {spec.id!r}: {kind} {name!r} is a name reserved for the runtime "
                    f"or already taken ({clash}); rename it"
                )
            taken[name] = kind


def observation_names(space) -> tuple[str, ...]:
    """The names kernels bind observations by: ``("obs",)`` for a Box, each leaf's for a Dict/Tuple."""
    return tuple(leaf.name for leaf in leaves(space)) if is_structured(space) else ("obs",)


def kernel_values(
    spec, params, buffers: dict, state: Mapping, precision: str | None = None, backend: str = "cpu"
) -> dict:
    """Every name an env kernel may bind: ``buffers`` (runtime names), ``state``, the params fields
    (array-valued ones as read-only ``backend`` arrays) and, for a ``precision`` (see
    `kernelgym.envs.spec.resolve_precision`), ``real``."""
    fields = {} if params is None else {field.name: getattr(params, field.name) for field in dataclasses.fields(params)}
    fields = {
        name: constant_table(value, backend) if isinstance(value, np.ndarray) else value
        for name, value in fields.items()
    }
    if precision is None:
        return {**buffers, **state, **fields}
    real = PRECISIONS[precision]
    # float params in the env's precision: a float64 param would promote float32 arithmetic
    fields = {name: real(value) if isinstance(value, float) else value for name, value in fields.items()}
    return {**buffers, **state, **fields, "real": real}


def constant_table(value: np.ndarray, backend: str):
    """An array-valued params field as kernels bind it: a read-only copy on ``backend``."""
    if backend == "cpu":
        table = np.array(value, copy=True)
        table.flags.writeable = False  # numba types it readonly: a kernel writing it does not compile
        return table
    return to_backend(value, backend)


def per_agent_layouts(spec, multi_agent: bool, observation_space=None) -> dict:
    """Which kernel values are per agent (dim 1 is the agent axis) for the extent checks
    (``observation_space``: the resolved one, for its leaf names; default the spec's); constant
    tables (array-valued params fields) are shared by every env."""
    layouts = {array.name: "per_agent" for array in spec.state if array.per_agent}
    if spec.params is not None:
        layouts.update(
            {
                field.name: "shared"
                for field in dataclasses.fields(spec.params)
                if isinstance(getattr(spec.params, field.name), np.ndarray)
            }
        )
    if multi_agent:
        space = spec.resolve().observation_space if observation_space is None else observation_space
        layouts.update(
            actions="per_agent", rewards="per_agent", **{name: "per_agent" for name in observation_names(space)}
        )
    return layouts


def bind_env_programs(
    spec, programs, arrays: dict, backend: str, params=None, precision: str | None = None, order=None
):
    """Bind programs of ``spec``'s kernels to ``arrays`` (runtime buffers and state by name), params
    and ``real`` (``precision``: None for the spec's default).

    For tools and tests that run an env's kernels outside `KernelVectorEnv` (the
    kit's canary buffers, one-step tests): ``programs`` are launches as
    `kernelgym.core.bind_launches` takes them, e.g.
    ``[[Branch("reset_mask", then=spec.load_kernels("reset_kernel"), otherwise=spec.load_kernels("step_kernel"))]]``.
    ``num_envs`` is the leading dim of ``arrays["rewards"]``; ``arrays["rng_states"]`` is shaped
    as the runtime's (`kernelgym.envs.runtime.streams`) and bound as its stream table.
    ``order`` (a `kernelgym.core.binding.LaunchOrder`, cpu only) runs the envs and agents
    in its order, in one thread (the kit's order check).
    """
    params = spec.params if params is None else params
    resolved = spec.resolve(params)
    multi_agent = resolved.num_agents > 1 or spec.kernel_layout == "agent"
    if "rng_states" in arrays:
        arrays = {**arrays, "rng_states": stream_table(arrays["rng_states"])}
    values = kernel_values(spec, params, arrays, {}, resolve_precision(spec, precision), backend)
    return bind_launches(
        programs,
        values,
        backend=backend,
        num_envs=arrays["rewards"].shape[0],
        num_agents=resolved.num_agents,
        layouts=per_agent_layouts(spec, multi_agent, resolved.observation_space),
        order=order,
    )
