"""The env's buffers: allocated once on the backend, registered with a core data manager.

A ``Box`` observation is one buffer, ``observations``. A ``Dict``/``Tuple`` observation
is one buffer per leaf, registered under the leaf's kernel name (``obs_image``; its
SAME_STEP final copy ``final_obs_image``), see `kernelgym.envs.observations`; the
obs attributes then hold trees of them (dicts/tuples, as the space).
"""

from __future__ import annotations

import numpy as np

from kernelgym.core import CUDADataManager, DataFeed, streams, to_numpy
from kernelgym.core.binding import PerEnvScalar
from kernelgym.core.data_manager import DONE, TIMESTEP
from kernelgym.envs.observations import build_tree, is_structured, leaves
from kernelgym.envs.runtime.autoreset import keep_final_leaf, keep_final_obs, mark_final_obs
from kernelgym.envs.runtime.streams import stream_shape, stream_table

__all__ = ["Buffers", "DATA_NAMES"]

# The runtime's buffers in the data manager (env state arrays may not use these names).
DATA_NAMES = (
    "observations",
    "rewards",
    "terminated",
    "truncated",
    "actions",
    "rng_states",
    "final_observations",
    "final_observation_mask",
    "episode_returns",
    "episode_lengths",
    "episode_mask",
    "running_returns",
)


def _uniform(shape, dtype, value=0) -> np.ndarray:
    """``value`` broadcast over ``shape``: the data manager then keeps one element as the
    host copy, not a buffer's worth (`kernelgym.core.data_manager`)."""
    return np.broadcast_to(np.array(value, dtype), shape)


class Buffers:
    """Every buffer of a `KernelVectorEnv`, the values its kernels bind, and what a step returns (`outputs`).

    Parameters
    ----------
    spec : EnvSpec
    state_shapes : dict of str to tuple
        Each state array's trailing shape (agent axis included).
    num_envs, num_agents : int
    agent_shape : tuple
        ``(num_agents,)`` when outputs carry an agent axis, else ``()``.
    observation_space, action_space : gymnasium spaces (one agent's)
    same_step : bool
        SAME_STEP autoreset (final-observation buffers get one row per env).
    backend : str
    """

    def __init__(
        self, spec, state_shapes, num_envs, num_agents, agent_shape, observation_space, action_space, same_step, backend
    ):
        n = num_envs
        self.observation_space = observation_space
        self.structured = is_structured(observation_space)
        # one buffer per leaf: (data manager name, final copy's name, leaf)
        self.leaves = (
            [(leaf.name, "final_" + leaf.name, leaf) for leaf in leaves(observation_space)]
            if self.structured
            else [("observations", "final_observations", leaves(observation_space)[0])]
        )
        leaf_names = tuple(name for pair in self.leaves for name in pair[:2])
        clashes = sorted(set(state_shapes) & set(DATA_NAMES + (DONE, TIMESTEP) + leaf_names))
        if clashes:
            raise ValueError(f"EnvSpec {spec.id!r} state: names {clashes} are reserved for the runtime")
        agents_layout = "per_agent" if agent_shape else "per_env"
        feed = DataFeed()
        for array in spec.state:
            # restore_on_reset arrays keep a copy of their initial rows: the data manager's
            # reset mechanism writes them back for the envs being reset
            feed.add_data(
                array.name,
                _uniform((n, *state_shapes[array.name]), array.dtype, array.initial),
                layout="per_agent" if array.per_agent else "per_env",
                save_copy_and_apply_at_reset=array.restore_on_reset,
            )
        for name, _, leaf in self.leaves:
            feed.add_data(name, _uniform((n, *agent_shape, *leaf.shape), leaf.dtype), layout=agents_layout)
        feed.add_data("rewards", _uniform((n, *agent_shape), np.float32), layout=agents_layout)
        feed.add_data("terminated", _uniform(n, np.bool_), layout="per_env")
        feed.add_data("truncated", _uniform(n, np.bool_), layout="per_env")
        feed.add_data(
            "actions", _uniform((n, *agent_shape, *action_space.shape), action_space.dtype), layout=agents_layout
        )
        # one stream per env, or per (env, agent) for agent-layout envs (see `streams`)
        rng_shape = stream_shape(spec, n, num_agents)
        feed.add_data(
            "rng_states", _uniform(rng_shape, np.uint64), layout="per_agent" if len(rng_shape) == 3 else "per_env"
        )
        # NEXT_STEP never writes the final-observation buffers: one row will do
        for _, final, leaf in self.leaves:
            feed.add_data(final, _uniform((n if same_step else 1, *agent_shape, *leaf.shape), leaf.dtype))
        feed.add_data("final_observation_mask", _uniform(n if same_step else 1, np.bool_))
        # episode statistics, kept by the bookkeeping in the step's own launch: the return
        # sums of the running episodes, and the return and length of those that ended this
        # step (a running episode's length is the step counter)
        for name, dtype, layout in (
            ("running_returns", np.float32, agents_layout),
            ("episode_returns", np.float32, agents_layout),
            ("episode_lengths", np.int64, "per_env"),
        ):
            feed.add_data(name, _uniform((n, *agent_shape) if layout == agents_layout else n, dtype), layout=layout)
        feed.add_data("episode_mask", _uniform(n, np.bool_), layout="per_env")
        self.data_manager = CUDADataManager(num_agents=num_agents, num_envs=n, backend=backend)
        self.data_manager.push_data_to_device(feed, torch_accessible=True)
        data = self.data_manager.device_data
        self.state = {array.name: data(array.name) for array in spec.state}
        self.restores = any(array.restore_on_reset for array in spec.state)
        # the leaves by kernel name (a Box: {"obs": ...}) and the observation trees they make
        self.obs_leaves = {leaf.name: data(name) for name, _, leaf in self.leaves}
        self.final_obs_leaves = {leaf.name: data(final) for _, final, leaf in self.leaves}
        self.obs, self.final_obs = self.tree(self.obs_leaves), self.tree(self.final_obs_leaves)
        self.rewards = data("rewards")
        self.terminated, self.truncated = data("terminated"), data("truncated")
        self.reset_mask, self.timestep = data(DONE), data(TIMESTEP)
        self.rng_states, self.actions = data("rng_states"), data("actions")
        self.final_mask = data("final_observation_mask")
        self.statistics = {
            name: data(name) for name in ("running_returns", "episode_returns", "episode_lengths", "episode_mask")
        }
        self.same_step = same_step

    def outputs(self, convert, statistics: bool) -> tuple:
        """What a step returns, ``(obs, rewards, terminated, truncated, info)``, each buffer as
        ``convert(name)`` of its data-manager name (torch views: ``data_on_device_via_torch``)."""
        obs = self.tree({leaf.name: convert(name) for name, _, leaf in self.leaves})
        info = self.info(convert, statistics)
        return obs, convert("rewards"), convert("terminated"), convert("truncated"), info

    def info(self, convert, statistics: bool) -> dict:
        """A step's ``info``, each buffer as ``convert(name)``: the final observations and their
        mask (SAME_STEP autoreset) and gymnasium's ``RecordEpisodeStatistics`` conventions
        (``statistics``), which the next step overwrites."""
        info = {}
        if self.same_step:
            info["final_obs"] = self.tree({leaf.name: convert(final) for _, final, leaf in self.leaves})
            info["_final_obs"] = convert("final_observation_mask")
        if statistics:
            info["episode"] = {"r": convert("episode_returns"), "l": convert("episode_lengths")}
            info["_episode"] = convert("episode_mask")
        return info

    def tree(self, leaf_values: dict):
        """The observation tree of the space holding ``leaf_values`` (by kernel name)."""
        return build_tree(self.observation_space, leaf_values)

    def kernel_buffers(self, max_episode_steps: PerEnvScalar) -> dict:
        """The runtime's values by the names kernels bind (public ones and the bookkeeping's own)."""
        n = self.rewards.shape[0]
        values = {
            "actions": self.actions,
            **self.obs_leaves,
            "rewards": self.rewards,
            "terminated": self.terminated,
            "rng_states": stream_table(self.rng_states),
            DONE: self.reset_mask,
            TIMESTEP: self.timestep,
            "_truncated": self.truncated,
            "_reward_rows": self.rewards.reshape(n, -1),
            "_final_obs_mask": self.final_mask,
            "_max_episode_steps": max_episode_steps,
            "_running_return_rows": self.statistics["running_returns"].reshape(n, -1),
            "_episode_return_rows": self.statistics["episode_returns"].reshape(n, -1),
            "_episode_length": self.statistics["episode_lengths"],
            "_episode_mask": self.statistics["episode_mask"],
        }
        # each leaf's rows and final rows, flat per env, for the SAME_STEP copy (`keep_final_kernels`)
        for name, array in self.obs_leaves.items():
            final = self.final_obs_leaves[name]
            row = int(np.prod(array.shape[1:]))
            values[self._rows_name(name)] = array.reshape(n, row)
            values[self._rows_name(name, "_final")] = final.reshape(final.shape[0], row)
        if self.restores:
            values.update(self.data_manager.reset_rows())
        return values

    def keep_final_kernels(self) -> list:
        """SAME_STEP: the bodies that keep the last observation of an env whose episode ended."""
        if not self.structured:
            return [keep_final_obs]
        return [mark_final_obs, *(keep_final_leaf(name) for name in self.obs_leaves)]

    def layouts(self) -> dict:
        """Final-observation buffers have one row in NEXT_STEP mode, where nothing writes them."""
        if self.same_step:
            return {}
        return {"_final_obs_mask": "shared", **{self._rows_name(name, "_final"): "shared" for name in self.obs_leaves}}

    def _rows_name(self, leaf: str, prefix: str = "") -> str:
        """``_obs_rows`` / ``_final_obs_rows`` for a Box; ``_obs_rows_<leaf>``, ... per leaf of a structured space."""
        return f"{prefix}_obs_rows" + (f"_{leaf}" if self.structured else "")

    def read(self, array) -> np.ndarray:
        """The host values of a backend array: the array itself on cpu and sim, a copy on
        cuda, read after the kernels queued on torch's current stream."""
        return streams.copy_to_host(array) if self.data_manager.backend == "cuda" else to_numpy(array)

    def write(self, array, host_values) -> None:
        """Copy host values into a backend array in place (the buffer is never rebound);
        on a device, on torch's current stream (ordered with the kernels queued there)."""
        if isinstance(array, np.ndarray):
            array[...] = host_values
        else:
            host = np.ascontiguousarray(np.broadcast_to(host_values, array.shape), dtype=array.dtype)
            streams.copy_to_device(array, host)

    def write_rows(self, array, value, index) -> None:
        """Write ``value`` into every env (``index`` None) or into env ``index``."""
        if index is None:
            self.write(array, value)
            return
        if isinstance(array, np.ndarray):
            array[index] = value
        else:
            host = streams.copy_to_host(array)
            host[index] = value
            streams.copy_to_device(array, host)
