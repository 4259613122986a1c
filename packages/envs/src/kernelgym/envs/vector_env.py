"""`KernelVectorEnv`: many copies of one env, stepped by kernels on the backend.

Every buffer (state, observations, rewards, flags, RNG streams) is allocated once on
the backend and reused: ``step`` copies the actions into a fixed action buffer,
checks them, launches the env's step kernel and one bookkeeping kernel, and returns
zero-copy torch views of the output buffers. Nothing leaves the device on the way.

Autoreset follows gymnasium 1.x:

- ``"next_step"`` (default): the step after an episode ended resets that env and
  returns its first observation with reward 0 and both flags False.
- ``"same_step"``: an env whose episode ends is reset within the same step; its last
  observation is kept in ``info["final_obs"]`` with the mask ``info["_final_obs"]``.

Every step's ``info`` also carries the return and length of the episodes that ended
in it, as gymnasium's ``RecordEpisodeStatistics`` does (see `EpisodeStatistics`).
"""

from __future__ import annotations

import copy
import functools
import math
from typing import NamedTuple

import numba
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from kernelgym.core import CUDADataManager, DataFeed, env_kernel, fuse_env_kernels, resolve_backend, rng, to_numpy
from kernelgym.core.kernels import EnvKernel, FusedEnvKernel
from kernelgym.core.data_manager import DONE, TIMESTEP
from kernelgym.envs.episode_statistics import EpisodeStatistics
from kernelgym.envs.spec import EnvSpec, validate_params

__all__ = ["KernelVectorEnv", "StepViews"]

_AUTORESET_MODES = {
    "next_step": AutoresetMode.NEXT_STEP,
    "same_step": AutoresetMode.SAME_STEP,
    AutoresetMode.NEXT_STEP: AutoresetMode.NEXT_STEP,
    AutoresetMode.SAME_STEP: AutoresetMode.SAME_STEP,
}
# Names of the runtime's buffers in the data manager (env state arrays may not use them).
RUNTIME_ARRAYS = ("observations", "rewards", "terminated", "truncated", "actions", "rng_states",
                  "final_observations", "final_observation_mask")
# Stands in for "no time limit" in the bookkeeping kernel (episode steps are int32).
_NO_TIME_LIMIT = np.iinfo(np.int32).max


class StepViews(NamedTuple):
    """The output buffers of a `KernelVectorEnv` as arrays (numpy or torch)."""

    obs: object
    rewards: object
    terminated: object
    truncated: object


# --------------------------------------------------------------- runtime kernels
@env_kernel
def _finish_step(i, reset_mask, terminated, truncated, timestep, max_episode_steps, same_step,
                 obs_rows, final_obs_rows, final_mask):
    """Time limit, episode counter and the reset flags, after the env's step kernel."""
    if reset_mask[i] and not same_step:
        # NEXT_STEP: the env kernel has just reset env i instead of stepping it.
        timestep[i] = 0
        truncated[i] = False
        reset_mask[i] = False
        return
    timestep[i] += 1
    truncated[i] = timestep[i] >= max_episode_steps
    done = terminated[i] or truncated[i]
    reset_mask[i] = done
    if same_step:
        final_mask[i] = done
        if done:
            # The env's reset kernel runs next, in the same step, and overwrites obs.
            for k in range(obs_rows.shape[1]):
                final_obs_rows[i, k] = obs_rows[i, k]
            timestep[i] = 0


@env_kernel
def _restore_initial(i, reset_mask, rows, value):
    """Write ``value`` into env i's row of a StateArray declared ``restore_on_reset``."""
    if reset_mask[i]:
        for k in range(rows.shape[1]):
            rows[i, k] = value


# ------------------------------------------------------------- action checks (cpu)
@numba.njit(cache=True)
def _first_out_of_range(rows, low, high):
    """Flat index of the first integer action outside [low, high] (per column), or -1."""
    for r in range(rows.shape[0]):
        for c in range(rows.shape[1]):
            value = rows[r, c]
            if value < low[c] or value > high[c]:
                return r * rows.shape[1] + c
    return -1


@numba.njit(cache=True)
def _first_non_finite(flat):
    """Index of the first NaN or infinite action, or -1."""
    for k in range(flat.shape[0]):
        if not math.isfinite(flat[k]):
            return k
    return -1


class _BoundLaunch:
    """Launches one kernel on fixed buffers: ``launch()``.

    The first call goes through ``kernel.launch``, which checks every argument and
    compiles; later calls go straight to the compiled launcher (the buffers never
    change), which saves the per-argument checks in the hot loop. ``args`` is one tuple
    of arguments per fused kernel for a ``FusedEnvKernel``.
    """

    def __init__(self, kernel, backend, counts, args):
        self._kernel, self._backend, self._counts, self._args = kernel, backend, counts, args
        self._fast = None

    def __call__(self) -> None:
        if self._fast is not None:
            self._fast()
            return
        self._kernel.launch(self._backend, *self._counts, *self._args)
        if self._backend == "cpu" and hasattr(self._kernel, "cpu_launcher"):
            fused = isinstance(self._kernel, FusedEnvKernel)
            arity = tuple(len(group) for group in self._args) if fused else len(self._args)
            flat = tuple(arg for group in self._args for arg in group) if fused else self._args
            self._fast = functools.partial(self._kernel.cpu_launcher(arity), *self._counts, *flat)
        elif self._backend != "cpu" and hasattr(self._kernel, "cuda"):
            self._fast = functools.partial(self._kernel.cuda, *self._counts, *self._args)
        else:
            self._fast = functools.partial(self._kernel.launch, self._backend, *self._counts, *self._args)


class KernelVectorEnv:
    """``num_envs`` copies of one env, stepped in lockstep by kernels on one backend.

    Create it with `kernelgym.envs.make`. Outputs are torch tensors on ``device``
    that alias the env's buffers: **the next ``step`` overwrites them**; copy what
    you keep.

    Parameters
    ----------
    spec : EnvSpec
    num_envs : int
    backend : {"auto", "cpu", "cuda", "sim"} or None
    seed : int or None
        Seeds one RNG stream per env.
    autoreset_mode : {"next_step", "same_step"} or gymnasium.vector.AutoresetMode
    max_episode_steps : int or None, optional
        Overrides the spec's time limit.
    check_action_values : bool
        Check discrete actions against the action space and continuous ones for NaN
        and infinity before every step (default True). On ``cuda`` this check waits
        for the device once per step; pass False to keep the hot loop asynchronous.
    **params
        Overrides of the env's params fields (see ``spec.params``).

    Attributes
    ----------
    num_envs, num_agents, backend, device, spec, params, autoreset_mode, max_episode_steps
    single_observation_space, single_action_space, observation_space, action_space
    multi_agent : bool
        Outputs carry an agent axis: obs ``(N, A, ...)``, rewards ``(N, A)``.
    state : dict of str to backend array
        The env's state buffers by name.
    data_manager : kernelgym.core.CUDADataManager
        Holds every buffer by name (state arrays, ``observations``, ``rewards``,
        ``terminated``, ``truncated``, ``actions``, ``rng_states``, ``_done_``,
        ``_timestep_``, ...), each with a torch view.
    """

    def __init__(self, spec: EnvSpec, num_envs: int, backend: str | None = "auto", seed=None,
                 autoreset_mode="next_step", max_episode_steps=None, check_action_values: bool = True,
                 **params):
        if not isinstance(spec, EnvSpec):
            raise TypeError(f"spec: expected an EnvSpec, got {type(spec).__name__}")
        if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)):
            raise TypeError(f"num_envs: expected an int >= 1, got {type(num_envs).__name__} {num_envs!r}")
        if num_envs < 1:
            raise ValueError(f"num_envs: expected an int >= 1, got {num_envs}")
        if autoreset_mode not in _AUTORESET_MODES:
            raise ValueError(
                f"autoreset_mode: expected 'next_step' or 'same_step', got {autoreset_mode!r}"
            )
        if not isinstance(check_action_values, bool):
            raise TypeError(f"check_action_values: expected a bool, got {check_action_values!r}")
        self.spec = spec
        self.num_envs = int(num_envs)
        self.backend = resolve_backend(backend)
        self.device = torch.device("cuda") if self.backend == "cuda" else torch.device("cpu")
        self.autoreset_mode = _AUTORESET_MODES[autoreset_mode]
        self.params = validate_params(spec, params)
        resolved = spec.resolve(self.params)
        if max_episode_steps is None:
            max_episode_steps = resolved.max_episode_steps
        elif isinstance(max_episode_steps, bool) or not isinstance(max_episode_steps, (int, np.integer)) \
                or not 1 <= max_episode_steps < _NO_TIME_LIMIT:
            raise ValueError(
                f"max_episode_steps: expected None or an int in [1, {_NO_TIME_LIMIT}), got {max_episode_steps!r}"
            )
        self.max_episode_steps = None if max_episode_steps is None else int(max_episode_steps)
        self.check_action_values = check_action_values
        self.num_agents = resolved.num_agents
        # copies: seeding one env's space must not change another's samples
        self.single_observation_space = copy.deepcopy(resolved.observation_space)
        self.single_action_space = copy.deepcopy(resolved.action_space)
        # Multi-agent envs keep the agent axis even when configured with one agent.
        self.multi_agent = self.num_agents > 1 or spec.kernel_layout == "agent"
        agents = (self.num_agents,) if self.multi_agent else ()
        self._agent_shape = agents
        self.observation_space = _batch(self.single_observation_space, agents, self.num_envs)
        self.action_space = _batch(self.single_action_space, agents, self.num_envs)
        self._state_shapes = resolved.state_shapes
        self._params_tuple = spec.params_tuple(self.params)
        self._step_kernel = spec.load("step_kernel")
        self._reset_kernel = spec.load("reset_kernel")
        self._closed = False
        self._allocate()
        self._prepare_action_checks()
        self._write(self._rng_states, rng.seed_streams(seed, self.num_envs))

    # ------------------------------------------------------------------ buffers
    def _allocate(self) -> None:
        """Register every buffer with a kernelgym.core data manager (``self.data_manager``).

        The env's state arrays keep their own names; the runtime's buffers use the
        names in ``RUNTIME_ARRAYS`` plus the data manager's ``_done_`` (int32: the env is
        pending a reset) and ``_timestep_`` (steps into the episode).
        """
        n = self.num_envs
        clashes = sorted(set(self._state_shapes) & set(RUNTIME_ARRAYS + (DONE, TIMESTEP)))
        if clashes:
            raise ValueError(f"EnvSpec {self.spec.id!r} state: names {clashes} are reserved for the runtime")
        agents_layout = "per_agent" if self._agent_shape else "per_env"
        same_step = self.autoreset_mode is AutoresetMode.SAME_STEP
        obs_shape = (n, *self._agent_shape, *self.single_observation_space.shape)
        action_shape = (n, *self._agent_shape, *self.single_action_space.shape)
        feed = DataFeed()
        for array in self.spec.state:
            feed.add_data(array.name, np.full((n, *self._state_shapes[array.name]), array.initial, array.dtype),
                          layout="per_agent" if array.per_agent else "per_env")
        feed.add_data("observations", np.zeros(obs_shape, self.single_observation_space.dtype), layout=agents_layout)
        feed.add_data("rewards", np.zeros((n, *self._agent_shape), np.float32), layout=agents_layout)
        feed.add_data("terminated", np.zeros(n, np.bool_), layout="per_env")
        feed.add_data("truncated", np.zeros(n, np.bool_), layout="per_env")
        feed.add_data("actions", np.zeros(action_shape, self.single_action_space.dtype), layout=agents_layout)
        feed.add_data("rng_states", np.zeros((n, 2), np.uint64), layout="per_env")
        # In NEXT_STEP mode the final-observation buffers are never written: one row keeps
        # the bookkeeping kernel's argument types (and its compiled code) the same.
        feed.add_data("final_observations",
                      np.zeros(obs_shape if same_step else (1, *obs_shape[1:]), self.single_observation_space.dtype))
        feed.add_data("final_observation_mask", np.zeros(n if same_step else 1, np.bool_))
        self.data_manager = CUDADataManager(num_agents=self.num_agents, num_envs=n, backend=self.backend)
        self.data_manager.push_data_to_device(feed, torch_accessible=True)
        data = self.data_manager.device_data
        self.state = {array.name: data(array.name) for array in self.spec.state}
        self._obs, self._rewards = data("observations"), data("rewards")
        self._terminated, self._truncated = data("terminated"), data("truncated")
        self._reset_mask, self._timestep = data(DONE), data(TIMESTEP)
        self._rng_states, self._actions = data("rng_states"), data("actions")
        self._final_obs, self._final_mask = data("final_observations"), data("final_observation_mask")
        row = int(np.prod(obs_shape[1:]))
        self._obs_rows = self._obs.reshape(n, row)
        self._final_obs_rows = self._final_obs.reshape(self._final_obs.shape[0], row)
        self._restore_rows = [
            (self.state[array.name].reshape(n, int(np.prod(self._state_shapes[array.name], dtype=np.int64))),
             array.dtype.type(array.initial))
            for array in self.spec.state
            if array.restore_on_reset and int(np.prod(self._state_shapes[array.name], dtype=np.int64)) > 0
        ]
        # Zero-copy torch views, made once: the buffers are never rebound.
        tensor = self.data_manager.data_on_device_via_torch
        self._obs_t, self._rewards_t = tensor("observations"), tensor("rewards")
        self._terminated_t, self._truncated_t = tensor("terminated"), tensor("truncated")
        self._actions_t = tensor("actions")
        self._final_obs_t, self._final_mask_t = tensor("final_observations"), tensor("final_observation_mask")
        self._info = {"final_obs": self._final_obs_t, "_final_obs": self._final_mask_t} if same_step else {}
        self._episode_statistics = EpisodeStatistics(self._rewards_t, self.autoreset_mode)
        self._info.update(self._episode_statistics.info)
        self._step_args = (
            self._actions, self._rng_states, self._reset_mask, self._obs, self._rewards, self._terminated,
            *self.state.values(), *self._params_tuple,
        )
        self._reset_args = (
            self._rng_states, self._reset_mask, self._obs, *self.state.values(), *self._params_tuple,
        )
        limit = _NO_TIME_LIMIT if self.max_episode_steps is None else self.max_episode_steps
        self._finish_args = (
            self._reset_mask, self._terminated, self._truncated, self._timestep, limit, same_step,
            self._obs_rows, self._final_obs_rows, self._final_mask,
        )
        self._numpy_views = None
        self._launch_reset = self._bind(self._reset_kernel, self._reset_args)
        if isinstance(self._step_kernel, EnvKernel):
            # One launch per step: the env's step and the time-limit bookkeeping, per env.
            fused = fuse_env_kernels(self._step_kernel, _finish_step)
            self._launch_step = _BoundLaunch(fused, self.backend, (n,), (self._step_args, self._finish_args))
        else:
            # Agent layouts (a block per env) cannot share a launch with per-env code.
            step = self._bind(self._step_kernel, self._step_args)
            finish = self._bind(_finish_step, self._finish_args, layout="env")
            self._launch_step = lambda: (step(), finish())

    def _write(self, array, host_values) -> None:
        """Copy host values into a backend array in place (the buffer is never rebound)."""
        if isinstance(array, np.ndarray):
            array[...] = host_values
        else:
            array.copy_to_device(np.ascontiguousarray(np.broadcast_to(host_values, array.shape), dtype=array.dtype))

    def _bind(self, kernel, args, layout=None) -> _BoundLaunch:
        layout = layout or self.spec.kernel_layout
        counts = (self.num_envs, self.num_agents) if layout == "agent" else (self.num_envs,)
        return _BoundLaunch(kernel, self.backend, counts, args)

    # -------------------------------------------------------------- public API
    def reset(self, seed=None, options=None, numpy: bool = False):
        """Start a new episode in every env.

        Parameters
        ----------
        seed : int or None
            Re-seeds the per-env RNG streams; None continues the current streams.
        options : None
            Accepted for gymnasium compatibility; must be None.
        numpy : bool
            Return numpy arrays instead of torch tensors.

        Returns
        -------
        obs, info
        """
        self._check_open()
        if options is not None:
            raise ValueError(f"options: reset options are not supported, got {options!r}")
        if seed is not None:
            if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
                raise ValueError(f"seed: expected None or an int >= 0, got {seed!r}")
            self._write(self._rng_states, rng.seed_streams(int(seed), self.num_envs))
        for array in self.spec.state:
            self._write(self.state[array.name], array.initial)
        for buffer, value in ((self._rewards, 0), (self._terminated, False), (self._truncated, False),
                              (self._timestep, 0), (self._final_mask, False), (self._reset_mask, 1)):
            self._write(buffer, value)
        self._launch_reset()
        self._write(self._reset_mask, 0)
        self._episode_statistics.reset()
        info = {}
        if numpy:
            return to_numpy(self._obs), info
        return self._obs_t, info

    def step(self, actions, numpy: bool = False):
        """Advance every env by one step.

        Parameters
        ----------
        actions : torch.Tensor or numpy.ndarray
            Shape ``(num_envs, *action_shape)`` (``(num_envs, num_agents, ...)`` for
            multi-agent envs), integer dtype for discrete spaces, float for Box. A
            numpy array on the cuda backend is copied to the device. A ``Discrete``
            space also takes ``(num_envs, 1)`` (the shape SB3 and skrl use).
        numpy : bool
            Return numpy arrays instead of torch tensors (a copy on cuda).

        Returns
        -------
        obs, rewards, terminated, truncated, info
            Views of the env's buffers, overwritten by the next step.

        Raises
        ------
        TypeError, ValueError
            Bad actions (type, shape, dtype, device, out-of-range or non-finite
            values); raised before any kernel runs, so no env state changes.
        """
        self._check_open()
        self._load_actions(actions)
        if self._restore_rows and self.autoreset_mode is AutoresetMode.NEXT_STEP:
            self._restore(self._reset_mask)
        self._launch_step()
        if self.autoreset_mode is AutoresetMode.SAME_STEP:
            if self._restore_rows:
                self._restore(self._reset_mask)
            self._launch_reset()
            self._clear_reset_mask()
        self._episode_statistics.update(self._rewards_t, self._terminated_t, self._truncated_t)
        if numpy:
            views = self.numpy()
            return views.obs, views.rewards, views.terminated, views.truncated, self._numpy_info()
        return self._obs_t, self._rewards_t, self._terminated_t, self._truncated_t, self._info

    def numpy(self) -> StepViews:
        """The output buffers as numpy arrays (zero-copy on cpu and sim, a copy on cuda)."""
        self._check_open()
        if self.backend == "cuda":
            return StepViews(*(to_numpy(a) for a in (self._obs, self._rewards, self._terminated, self._truncated)))
        if self._numpy_views is None:
            self._numpy_views = StepViews(
                *(to_numpy(a) for a in (self._obs, self._rewards, self._terminated, self._truncated))
            )
        return self._numpy_views

    def render(self, index: int = 0) -> np.ndarray:
        """An RGB ``(H, W, 3)`` uint8 picture of env ``index`` (the env's renderer)."""
        self._check_open()
        index = self._check_index(index)
        renderer = self.spec.load("render")
        if renderer is None:
            raise NotImplementedError(f"env {self.spec.id!r} has no renderer (its EnvSpec.render is None)")
        state = {name: to_numpy(array) for name, array in self.state.items()}
        return renderer(state, index, self.params)

    def get_state(self, index: int | None = None) -> dict[str, np.ndarray]:
        """A host copy of the state arrays (all envs, or env ``index``'s slice)."""
        self._check_open()
        if index is None:
            return {name: np.array(to_numpy(array)) for name, array in self.state.items()}
        index = self._check_index(index)
        return {name: np.array(to_numpy(array)[index]) for name, array in self.state.items()}

    def set_state(self, state: dict, index: int | None = None) -> None:
        """Write state values into every env (``index=None``) or into env ``index``.

        The env(s) written are not pending a reset. Their episode step counter (which
        truncates at ``max_episode_steps``) starts from the value of the state array
        named by ``spec.episode_step`` when the spec names one (the env is then that
        many steps into its episode), else from 0. Every state array must be given,
        with its per-env shape (or the full batch shape when ``index`` is None) and a
        dtype that casts safely.
        """
        self._check_open()
        if not isinstance(state, dict):
            raise TypeError(f"state: expected a dict of arrays, got {type(state).__name__}")
        missing = sorted(set(self.state) - set(state))
        unknown = sorted(set(state) - set(self.state))
        if missing or unknown:
            raise KeyError(f"state: expected keys {sorted(self.state)}; missing {missing}, unknown {unknown}")
        if index is not None:
            index = self._check_index(index)
        checked = {}
        for name, value in state.items():
            target = self.state[name]
            value = np.asarray(value)
            expected = target.shape if index is None else target.shape[1:]
            if value.shape != expected:
                raise ValueError(f"state[{name!r}]: expected shape {expected}, got {value.shape}")
            if not np.can_cast(value.dtype, target.dtype, casting="same_kind"):
                raise TypeError(f"state[{name!r}]: expected dtype {target.dtype}, got {value.dtype}")
            checked[name] = value
        episode_steps = self._episode_steps(checked)
        for name, value in checked.items():
            self._write_rows(self.state[name], value, index)
        for buffer, value in ((self._reset_mask, 0), (self._timestep, episode_steps)):
            self._write_rows(buffer, value, index)

    def _episode_steps(self, state: dict):
        """Where ``set_state`` starts the episode step counter: the ``spec.episode_step`` values, else 0."""
        name = self.spec.episode_step
        if name is None:
            return 0
        steps = state[name]
        if steps.dtype.kind not in "iu" or np.any(steps < 0) or np.any(steps >= _NO_TIME_LIMIT):
            raise ValueError(
                f"state[{name!r}]: the episode step count (spec.episode_step) must be integers in "
                f"[0, {_NO_TIME_LIMIT}), got {steps.dtype} values from {int(steps.min())} to {int(steps.max())}"
            )
        return steps.astype(np.int32)

    def close(self) -> None:
        """Release the buffers; the env cannot be used afterwards."""
        self._closed = True
        self.state = {}
        self._step_args = self._reset_args = self._finish_args = ()
        self._launch_step = self._launch_reset = None
        self._numpy_views = None

    def __repr__(self):
        return (
            f"KernelVectorEnv({self.spec.id}, num_envs={self.num_envs}, backend={self.backend!r}, "
            f"autoreset_mode={self.autoreset_mode.value})"
        )

    # ---------------------------------------------------------------- helpers
    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{self!r} is closed")

    def _check_index(self, index) -> int:
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise TypeError(f"index: expected an int, got {type(index).__name__} {index!r}")
        if not 0 <= index < self.num_envs:
            raise IndexError(f"index: expected 0 <= index < {self.num_envs}, got {index}")
        return int(index)

    def _write_rows(self, array, value, index) -> None:
        if index is None:
            self._write(array, value)
            return
        if isinstance(array, np.ndarray):
            array[index] = value
        else:
            host = array.copy_to_host()
            host[index] = value
            array.copy_to_device(host)

    def _restore(self, mask) -> None:
        for rows, value in self._restore_rows:
            _restore_initial.launch(self.backend, self.num_envs, mask, rows, value)

    def _clear_reset_mask(self) -> None:
        # SAME_STEP: the reset kernel consumed the mask; clear it so the next step steps.
        if isinstance(self._reset_mask, np.ndarray):
            self._reset_mask.fill(0)
        else:
            self.data_manager.data_on_device_via_torch(DONE).fill_(0)

    def _numpy_info(self) -> dict:
        return _numpy_tree(self._info)

    # ------------------------------------------------------------------ actions
    def _prepare_action_checks(self) -> None:
        space = self.single_action_space
        self._discrete = isinstance(space, (spaces.Discrete, spaces.MultiDiscrete))
        if isinstance(space, spaces.Discrete):
            low = np.array([space.start], dtype=np.int64)
            high = low + space.n - 1
        elif isinstance(space, spaces.MultiDiscrete):
            low = np.asarray(space.start, dtype=np.int64).reshape(-1)
            high = low + np.asarray(space.nvec, dtype=np.int64).reshape(-1) - 1
        else:
            low = high = None
        self._action_low, self._action_high = low, high
        if self.backend != "cuda":
            # a numpy view of the action buffer: one row per discrete action, flat for Box
            self._action_rows = to_numpy(self._actions).reshape((-1, low.shape[0]) if self._discrete else -1)
        else:
            self._action_rows = None
            if low is not None:
                self._action_low_t = torch.as_tensor(low, device=self.device)
                self._action_high_t = torch.as_tensor(high, device=self.device)

    def _load_actions(self, actions) -> None:
        """Copy ``actions`` into the action buffer after checking them (no kernel runs before)."""
        if isinstance(actions, torch.Tensor):
            if actions.device != self.device and not (actions.device.type == self.device.type == "cuda"):
                raise ValueError(f"actions: expected a tensor on {self.device}, got one on {actions.device}")
            dtype = _numpy_dtype(actions.dtype)
        elif isinstance(actions, np.ndarray):
            dtype = actions.dtype
        else:
            raise TypeError(f"actions: expected a torch.Tensor or numpy.ndarray, got {type(actions).__name__}")
        if tuple(actions.shape) != self._actions.shape:
            if isinstance(self.single_action_space, spaces.Discrete) and \
                    tuple(actions.shape) == (*self._actions.shape, 1):
                actions = actions.reshape(self._actions.shape)  # (N, 1) as SB3 and skrl shape Discrete actions
            else:
                raise ValueError(f"actions: expected shape {self._actions.shape}, got {tuple(actions.shape)}")
        if self._discrete:
            if dtype is None or dtype.kind not in "iu":
                raise TypeError(
                    f"actions: expected an integer dtype for {self.single_action_space}, got {actions.dtype}"
                )
        elif dtype is None or dtype.kind not in "f":
            raise TypeError(f"actions: expected a float dtype for {self.single_action_space}, got {actions.dtype}")
        if self.backend == "cuda":
            self._load_actions_cuda(actions)
            return
        source = actions.detach().numpy() if isinstance(actions, torch.Tensor) else actions
        np.copyto(self._action_rows.reshape(self._actions.shape), source, casting="unsafe")
        if not self.check_action_values:
            return
        if self._discrete:
            bad = _first_out_of_range(self._action_rows, self._action_low, self._action_high)
        else:
            bad = _first_non_finite(self._action_rows)
        if bad >= 0:
            self._raise_bad_action(source, bad)

    def _load_actions_cuda(self, actions) -> None:
        source = torch.as_tensor(actions) if isinstance(actions, np.ndarray) else actions
        self._actions_t.copy_(source)
        if not self.check_action_values:
            return
        flat = self._actions_t.reshape(-1, 1 if self._action_low is None else self._action_low.shape[0])
        if self._discrete:
            bad = ((flat < self._action_low_t) | (flat > self._action_high_t)).reshape(-1)
        else:
            bad = ~torch.isfinite(flat.reshape(-1))
        if bool(bad.any()):
            self._raise_bad_action(to_numpy(actions), int(bad.nonzero()[0, 0]))

    def _raise_bad_action(self, actions, flat_index: int):
        host = np.asarray(actions)
        position = tuple(int(k) for k in np.unravel_index(flat_index, host.shape))
        value = host[position].item()
        if self._discrete:
            raise ValueError(
                f"actions: expected values in {self.single_action_space}, got {value!r} at index {position}"
            )
        raise ValueError(f"actions: expected finite values, got {value!r} at index {position}")


@functools.lru_cache(maxsize=None)
def _numpy_dtype(torch_dtype):
    """numpy's twin of a torch dtype (cached: no tensor is made per step), or None."""
    try:
        return np.dtype(torch.empty((), dtype=torch_dtype).numpy().dtype)
    except TypeError:  # bfloat16 and friends have no numpy twin
        return None


def _numpy_tree(info: dict) -> dict:
    """``info`` with every tensor as a numpy array (zero-copy on cpu, a copy on cuda)."""
    return {key: _numpy_tree(value) if isinstance(value, dict) else value.numpy(force=True)
            for key, value in info.items()}


def _batch(space, agents, num_envs):
    for count in (*agents, num_envs):
        space = batch_space(space, count)
    return space
