"""`KernelVectorEnv`: many copies of one env, stepped by kernels on the backend.

Every buffer (state, observations, rewards, flags, RNG streams) is allocated once on
the backend and reused (`buffers`). ``step`` hands the actions to ONE composed launch for
env-layout envs (through the fixed action buffer, which thus always holds the actions
just stepped: a plain memory copy on cpu when their dtype and layout match, else one
checked, casting copy: `actions`) -- the action check, the env's reset for the envs
pending a reset, its step for the others, then the bookkeeping (`autoreset`) -- all
bound by name once, at construction (`kernelgym.core.binding`), and returns zero-copy torch views of the output
buffers. Nothing leaves the device on the way, and the per-call path allocates nothing.

Autoreset follows gymnasium 1.x:

- ``"next_step"`` (default): the step after an episode ended resets that env and
  returns its first observation with reward 0 and both flags False.
- ``"same_step"``: an env whose episode ends is reset within the same step; its last
  observation is kept in ``info["final_obs"]`` with the mask ``info["_final_obs"]``.

Every step's ``info`` also carries the return and length of the episodes that ended
in it, as gymnasium's ``RecordEpisodeStatistics`` does: ``info["episode"]["r"]`` and
``["l"]``, 0 where ``info["_episode"]`` is False. The step's own launch keeps them
(`autoreset.count_step_with_statistics`); in NEXT_STEP mode the reset step belongs to
no episode. ``episode_statistics=False`` leaves them out.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from gymnasium.vector import AutoresetMode

from kernelgym.core import bind, bind_launches, resolve_backend, to_numpy
from kernelgym.core.arrays import to_backend
from kernelgym.core.binding import NO_FAULT, BoundLaunch, PerEnvScalar, check_fast_math
from kernelgym.core.compile_notice import compile_notice
from kernelgym.envs.runtime.actions import ActionLoader, check_mode
from kernelgym.envs.runtime.autoreset import reset_programs, step_programs
from kernelgym.envs.runtime.batched_spaces import batch
from kernelgym.envs.runtime.buffers import Buffers
from kernelgym.envs.runtime.names import check_names, kernel_values, per_agent_layouts
from kernelgym.envs.runtime.params import ParamsTable, draw_params, split_params
from kernelgym.envs.runtime.state_io import NO_TIME_LIMIT, StateBuffers, StateIO
from kernelgym.envs.runtime.streams import seed_env_streams
from kernelgym.envs.spec import EnvSpec, resolve_precision, validate_params

__all__ = ["KernelVectorEnv", "StepViews"]

_AUTORESET_MODES = {
    "next_step": AutoresetMode.NEXT_STEP,
    "same_step": AutoresetMode.SAME_STEP,
    AutoresetMode.NEXT_STEP: AutoresetMode.NEXT_STEP,
    AutoresetMode.SAME_STEP: AutoresetMode.SAME_STEP,
}

# The public attributes that may change after make(); every other one is fixed (the kernels
# are compiled for it), and setting it raises instead of changing nothing.
_SETTABLE = frozenset({"max_episode_steps"})
# The most envs one make() takes: a launch's grid of one thread (or block) per env stays within
# CUDA's 2**31 - 1 blocks along x, and every per-env index fits an int32.
MAX_NUM_ENVS = 2**31 - 1
_FIXED_HINTS = {
    "state": "write values with set_state(...) or in place (env.state[name][...] = values)",
    "params": "per-env fields change with set_params(...); other fields are compile-time constants (a new make())",
}


class LaunchPlan(NamedTuple):
    """An env's step and reset programs as `KernelVectorEnv` binds them (`kernelgym.core.bind_launches`)."""

    step: list
    reset: list
    values: dict
    per_call: tuple
    options: dict  # bind_launches's backend, num_envs, num_agents, layouts and fast_math
    check: Any  # the action check bound as a launch of its own (sync on a device), or None


class StepViews(NamedTuple):
    """The output buffers of a `KernelVectorEnv` as arrays (numpy or torch)."""

    obs: object
    rewards: object
    terminated: object
    truncated: object


class KernelVectorEnv(StateIO):
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
        Seeds one RNG stream per env, or one per (env, agent) for agent-layout envs
        (`kernelgym.envs.runtime.streams`).
    autoreset_mode : {"next_step", "same_step"} or gymnasium.vector.AutoresetMode
    max_episode_steps : int or None, optional
        Overrides the spec's time limit.
    check_action_values : {True, "sync", "deferred", False}
        Check discrete actions against the action space and continuous ones for NaN
        and infinity, inside the step launch, in parallel; an env with a bad action is
        never stepped. ``"sync"``: the error is raised before ``step`` returns and no
        env changes (one host synchronization per step on cuda). ``"deferred"``: no
        host synchronization; on cuda/sim the envs with good actions of that step do
        step, and the error (the smallest bad index since the last check) is raised at
        the next read of results: ``numpy()``, ``reset()``, ``get_state()``,
        ``close()`` or ``check_actions()`` (on cpu, where a read costs nothing, it is
        raised at once, as with "sync"). True (default): "deferred" on cuda and sim
        (the simulator models the GPU), "sync" on cpu. False: no value check (types
        and shapes are always checked).
    episode_statistics : bool
        Keep each finished episode's return and length in ``info`` (default True);
        False saves their upkeep in every step.
    precision : {"float64", "float32"} or None
        The arithmetic the env's kernels are compiled for, for envs that declare a
        choice (`EnvSpec.precisions`; the classic-control envs: float64, bitwise as
        gymnasium's physics, or float32, for GPUs with slow float64). None: the env's
        default. Observations and rewards are float32 either way.
    fast_math : bool
        Compile the env's kernels with FMA contraction on (default False): on cuda NVVM
        may fuse ``a * b + c`` into one rounding (``fma.rn``), a little faster, and the
        cpu build may fuse too (LLVM, where the CPU has FMA). Results then differ from
        the default build's in the last bits, within the tolerance the kit proves
        (``kernelgym check ENV_ID --fast-math``); the default gives the same bits on
        cpu, sim and cuda for ``+ - * /`` and sqrt.
    randomize : dict of str to (low, high), or None
        Per-env fields (`EnvSpec.per_env_params`) drawn uniformly in ``[low, high)`` for
        each env at each of its resets, on the backend, from the env's own stream, before
        the env's reset body (fields in the params record's order; see
        `kernelgym.envs.runtime.params`). Env-layout envs only. ``{}`` compiles the draw
        with no field active, for ``set_randomize`` later. None (default): no draw.
    **params
        Overrides of the env's params fields (see ``spec.params``). A per-env field
        (`EnvSpec.per_env_params`) also takes a ``(num_envs,)`` array; any other field is
        a compile-time constant and refuses one.

    Attributes
    ----------
    num_envs, num_agents, backend, device, spec, autoreset_mode, episode_statistics
        Fixed at construction: setting one (or any other public attribute but
        ``max_episode_steps``) raises AttributeError naming it.
    max_episode_steps : int or None
        The time limit (None: none). Settable: the new limit applies from the next step,
        with no recompilation (an episode already that long truncates at its next step).
    params : params record
        The scalar params (defaults and scalar overrides); per-env values: `get_params`,
        `env_params`.
    precision : str or None
        The precision compiled for (None: the env declares no choice).
    fast_math : bool
        Whether the kernels were compiled with FMA contraction on.
    single_observation_space, single_action_space, observation_space, action_space
    multi_agent : bool
        Outputs carry an agent axis: obs ``(N, A, ...)``, rewards ``(N, A)``.
        A ``Dict``/``Tuple`` observation space gives obs (and SAME_STEP
        ``info["final_obs"]``) as a dict/tuple of such tensors, one per leaf, as
        ``observation_space`` says (`kernelgym.envs.observations`).
    state : mapping of str to backend array
        The env's state buffers by name, read-only: the kernels are bound to these
        buffers, so an entry cannot be rebound (write with `set_state`, or in place).
    data_manager : kernelgym.core.CUDADataManager
        Holds every buffer by name (state arrays, ``observations`` or one per leaf of
        a Dict/Tuple space by its kernel name, ``obs_<key>``, ``rewards``,
        ``terminated``, ``truncated``, ``actions`` (the last step's), ``rng_states``, ``_done_``,
        ``_timestep_``, ...), each with a torch view.
    """

    # the bound launches (`_bind`); close() drops them, and every use follows `_check_open`
    _step_launch: BoundLaunch
    _launch_step: Callable[..., Any]
    _launch_reset: BoundLaunch
    _launch_check: Callable[..., Any] | None

    def __init__(
        self,
        spec: EnvSpec,
        num_envs: int,
        backend: str | None = "auto",
        seed=None,
        autoreset_mode="next_step",
        max_episode_steps=None,
        check_action_values: bool = True,
        episode_statistics: bool = True,
        precision: str | None = None,
        fast_math: bool = False,
        randomize: dict | None = None,
        **params,
    ):
        if not isinstance(spec, EnvSpec):
            raise TypeError(f"spec: expected an EnvSpec, got {type(spec).__name__}")
        if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)):
            raise TypeError(f"num_envs: expected an int >= 1, got {type(num_envs).__name__} {num_envs!r}")
        if not 1 <= num_envs <= MAX_NUM_ENVS:
            # checked before any buffer is allocated: numpy's allocation error names no argument
            raise ValueError(f"num_envs: expected an int in [1, {MAX_NUM_ENVS}], got {num_envs}")
        if autoreset_mode not in _AUTORESET_MODES:
            raise ValueError(f"autoreset_mode: expected 'next_step' or 'same_step', got {autoreset_mode!r}")
        if not isinstance(episode_statistics, (bool, np.bool_)):
            raise TypeError(f"episode_statistics: expected True or False, got {episode_statistics!r}")
        self.episode_statistics = bool(episode_statistics)
        check_names(spec)
        self.spec = spec
        self.num_envs = int(num_envs)
        self.backend = resolve_backend(backend)
        action_check = check_mode(check_action_values, self.backend)
        self.autoreset_mode = _AUTORESET_MODES[autoreset_mode]
        params, per_env_values = split_params(spec, params)
        self.params = validate_params(spec, params)
        self.precision = resolve_precision(spec, precision)
        if randomize is not None and not spec.per_env_params:
            raise ValueError(
                f"randomize: env {spec.id!r} declares no per-env params (EnvSpec.per_env_params); got {randomize!r}"
            )
        self.fast_math = check_fast_math(fast_math)
        resolved = spec.resolve(self.params)
        if max_episode_steps is None:
            max_episode_steps = resolved.max_episode_steps
        elif (
            isinstance(max_episode_steps, bool)
            or not isinstance(max_episode_steps, (int, np.integer))
            or not 1 <= max_episode_steps < NO_TIME_LIMIT
        ):
            raise ValueError(
                f"max_episode_steps: expected None or an int in [1, {NO_TIME_LIMIT}), got {max_episode_steps!r}"
            )
        self._max_episode_steps = None if max_episode_steps is None else int(max_episode_steps)
        # the limit is read by the launch at each step (a stride-0 per-env scalar): settable at run time
        self._time_limit = to_backend(np.full(self.num_envs, self._limit(), np.int32), self.backend)
        self._time_limit_stride = to_backend(np.zeros(1, np.int64), self.backend)
        self.check_action_values = check_action_values
        self.num_agents = resolved.num_agents
        self._state_bounds = resolved.state_bounds  # what set_state lets in (StateArray.low/high)
        # copies: seeding one env's space must not change another's samples
        self.single_observation_space = copy.deepcopy(resolved.observation_space)
        self.single_action_space = copy.deepcopy(resolved.action_space)
        # Multi-agent envs keep the agent axis even when configured with one agent.
        self.multi_agent = self.num_agents > 1 or spec.kernel_layout == "agent"
        agents = (self.num_agents,) if self.multi_agent else ()
        # bounds as broadcast views of one env's: nothing here grows with num_envs x num_agents
        self.observation_space = batch(self.single_observation_space, (*agents, self.num_envs))
        self.action_space = batch(self.single_action_space, (*agents, self.num_envs))
        same_step = self.autoreset_mode is AutoresetMode.SAME_STEP
        self._buffers = buffers = Buffers(
            spec,
            resolved.state_shapes,
            self.num_envs,
            self.num_agents,
            agents,
            self.single_observation_space,
            self.single_action_space,
            same_step,
            self.backend,
        )
        self.data_manager = buffers.data_manager
        self._state = StateBuffers(buffers.state)
        self._params_table = (
            ParamsTable(spec, self.params, per_env_values, self.num_envs, self.backend, self.precision, randomize)
            if spec.per_env_params
            else None
        )
        self._closed = False
        # envs without a state yet (step() before reset() would step all-zero states)
        self._unstarted = set(range(self.num_envs))
        self._numpy_views: StepViews | None = None
        # what step() returns: torch views made once (the buffers are never rebound), on the
        # first step or reset that returns tensors (`_tensor_outputs`): a caller reading numpy
        # arrays (the kit) never imports torch, which takes seconds
        self._outputs: tuple | None = None
        self._actions = ActionLoader(self.single_action_space, buffers.actions, self.backend, action_check)
        # where the host reads the action check's record: from each cpu launch's return,
        # or at the next read of results (deferred on a device)
        self._deferred_check = action_check == "deferred" and self.backend != "cpu"
        # a cold cache compiles the launchers here (a minute or more): one stderr line says so first
        with compile_notice(spec.id, self.backend):
            self._bind(same_step)
        buffers.write(buffers.rng_states, seed_env_streams(spec, seed, self.num_envs, self.num_agents))
        self._frozen = True

    @property
    def device(self):
        """The torch device of the outputs (``torch.device``): ``cuda`` on the cuda backend, else ``cpu``."""
        import torch

        return torch.device("cuda" if self.backend == "cuda" else "cpu")

    def __setattr__(self, name, value):
        if name[0] != "_" and name not in _SETTABLE and self.__dict__.get("_frozen"):
            hint = _FIXED_HINTS.get(
                name, "its value is fixed at make() (the kernels are compiled for it); make a new env to change it"
            )
            raise AttributeError(f"{name}: cannot set this attribute of KernelVectorEnv after make(); {hint}")
        super().__setattr__(name, value)

    @property
    def state(self) -> StateBuffers:
        """The env's state buffers by name (read-only mapping; see the class docstring)."""
        return self._state

    @property
    def max_episode_steps(self) -> int | None:
        """The time limit (None: none); setting it applies from the next step, with no recompilation."""
        return self._max_episode_steps

    @max_episode_steps.setter
    def max_episode_steps(self, value) -> None:
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 1 <= value < NO_TIME_LIMIT
        ):
            raise ValueError(f"max_episode_steps: expected None or an int in [1, {NO_TIME_LIMIT}), got {value!r}")
        self._check_open()
        self._max_episode_steps = None if value is None else int(value)
        self._buffers.write(self._time_limit, self._limit())

    def _limit(self) -> int:
        """The limit the bookkeeping compares step counts with (`NO_TIME_LIMIT` for none)."""
        return NO_TIME_LIMIT if self._max_episode_steps is None else self._max_episode_steps

    def _bind(self, same_step: bool) -> None:
        """Bind the composed step and reset launches by name, once (names and extents checked here)."""
        plan = self._launch_plan(same_step)
        self._launch_check = None
        if plan.check is not None:  # sync on a device: check, read the record, then step
            self._launch_check = bind([plan.check], plan.values, per_call=plan.per_call, **plan.options).as_function()
        # the bound step (its launch records and paths), and its fastest callable for the hot path
        # the step compiles at its first launch: bad actions are refused before that build
        # (the reset's compiles here: reset() comes first and takes no per-call values)
        self._step_launch = bind_launches(
            plan.step, plan.values, per_call=plan.per_call, compile_at="first_launch", **plan.options
        )
        self._launch_step = self._step_launch.as_function()
        # reset() runs rarely (autoreset is part of the step): its serial twin alone, where
        # the thread team's build would double the compile of a cold make()
        self._launch_reset = bind_launches(plan.reset, plan.values, cpu_threads="one", **plan.options)

    def _launch_plan(self, same_step: bool) -> LaunchPlan:
        """What `_bind` binds: the step and reset programs, the values they bind by name, and how.

        The testing kit binds the same plan to its own (canary-padded) copies of the values, so
        that its launches share this env's compiled programs.
        """
        spec = self.spec
        step, reset = spec.load_kernels("step_kernel"), spec.load_kernels("reset_kernel")
        limit = PerEnvScalar(self._time_limit, self._time_limit_stride)
        actions = self._actions
        values = {
            **kernel_values(
                spec, self.params, self._buffers.kernel_buffers(limit), self.state, self.precision, self.backend
            ),
            **actions.values,
        }
        layouts = {
            **per_agent_layouts(spec, self.multi_agent, self.single_observation_space),
            **self._buffers.layouts(),
            **actions.layouts,
        }
        table = self._params_table
        if table is not None:  # per-env fields read their env's entry of the table
            values.update(table.values())
            layouts.update(table.layouts())
            if table.randomized:  # the reset draws the randomized fields first
                reset = (draw_params, *reset)
        options: dict[str, Any] = {
            "backend": self.backend,
            "num_envs": self.num_envs,
            "num_agents": self.num_agents,
            "layouts": layouts,
            "fast_math": self.fast_math,
        }
        restores = self._buffers.restores
        statistics = self.episode_statistics
        programs = step_programs(
            step,
            reset,
            spec.kernel_layout,
            same_step,
            restores,
            statistics,
            self.multi_agent,
            self._buffers.keep_final_kernels(),
        )
        check = actions.precondition
        separate_check = None
        if check is not None and (self.backend == "cpu" or actions.mode == "deferred"):
            # the check heads every launch: cpu runs no env when one fails, a device skips the failing ones
            programs = [[check, *program] for program in programs]
        elif check is not None:
            separate_check = check
        resets = reset_programs(reset, spec.kernel_layout, restores, statistics, self.multi_agent)
        return LaunchPlan(programs, resets, values, actions.per_call, options, separate_check)

    # -------------------------------------------------------------- public API
    def reset(self, seed=None, options=None, numpy: bool = False):
        """Start a new episode in every env.

        Parameters
        ----------
        seed : int or None
            Re-seeds the RNG streams (per env, or per (env, agent)); None continues the current streams.
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
        self._raise_deferred_fault()
        buffers = self._buffers
        if seed is not None:
            if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
                raise ValueError(f"seed: expected None or an int >= 0, got {seed!r}")
            buffers.write(buffers.rng_states, seed_env_streams(self.spec, int(seed), self.num_envs, self.num_agents))
        for array in self.spec.state:
            if not array.keep_on_reset:  # a trainer-set value survives resets
                buffers.write(self.state[array.name], array.initial)
        buffers.write(buffers.final_mask, False)
        buffers.write(buffers.reset_mask, 1)  # the reset launch resets every env, then clears it
        self._launch_reset()
        self._unstarted = None
        if numpy:
            return buffers.tree({name: buffers.read(leaf) for name, leaf in buffers.obs_leaves.items()}), {}
        return self._tensor_outputs()[0], {}

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
            Bad actions (type, shape, dtype, device: before any kernel runs;
            out-of-range or non-finite values: see ``check_action_values``). With a
            "sync" check (the default on cpu) no env state changes.
        RuntimeError
            ``step`` before the first ``reset`` (or a ``set_state`` of every env).
        """
        if self._closed or self._unstarted is not None:  # one test on the hot path
            self._refuse_step()
        arguments = self._actions.arguments(actions)
        if self._launch_check is not None:  # "sync" on a device: check, read the record, then step
            self._launch_check(*arguments)
            self._actions.raise_fault(actions)
        fault = self._launch_step(*arguments)  # cpu launches return their check's result
        if fault is not None and fault != NO_FAULT:
            self._actions.raise_fault(actions)
        if numpy:
            views = self.numpy()
            return views.obs, views.rewards, views.terminated, views.truncated, self._numpy_info()
        return self._outputs if self._outputs is not None else self._tensor_outputs()

    def set_params(self, **values) -> None:
        """Change per-env params (`EnvSpec.per_env_params`) between steps, with no recompilation.

        Parameters
        ----------
        **values
            A scalar (every env) or a ``(num_envs,)`` array per field. Each is checked
            (shape, finite, the params record's own checks on its smallest and largest
            value) before anything is written. A randomized field is drawn anew at each
            reset of an env, over what is written here.

        Raises
        ------
        TypeError
            A field that is a compile-time constant, or not a field.
        ValueError
            A bad shape or value.
        """
        self._check_open()
        self._per_env_table("set_params").set(self._buffers.write, values)

    def set_randomize(self, randomize: dict) -> None:
        """Replace the ``randomize=`` ranges (e.g. a curriculum), with no recompilation.

        Fields left out are no longer drawn. The env must have been made with
        ``randomize=`` (``{}`` will do).
        """
        self._check_open()
        self._per_env_table("set_randomize").set_randomize(self._buffers.write, randomize)

    @property
    def randomize(self) -> dict:
        """The active randomize ranges, ``{field: (low, high)}``."""
        return {} if self._params_table is None else dict(self._params_table.randomize)

    def get_params(self) -> dict[str, np.ndarray]:
        """Host copies of the per-env params, ``{field: (num_envs,) array}`` (``real`` dtype)."""
        self._check_open()
        table = self._params_table
        if table is None:
            return {}
        host = table.host(self._buffers.read)
        return {name: host[row].copy() for row, name in enumerate(table.fields)}

    def env_params(self, index: int):
        """Env ``index``'s params record: `params` with its current per-env values."""
        self._check_open()
        index = self._check_index(index)
        table = self._params_table
        return self.params if table is None else table.env_params(self._buffers.read, index)

    def _per_env_table(self, where: str) -> ParamsTable:
        if self._params_table is None:
            raise TypeError(
                f"{where}: env {self.spec.id!r} declares no per-env params (EnvSpec.per_env_params); "
                f"its params are compile-time constants (change them with a new make())"
            )
        return self._params_table

    def check_actions(self) -> None:
        """Raise the bad action a deferred check recorded since the last read, if any.

        Raises
        ------
        ValueError
            As ``step`` would have ("actions: expected values in Discrete(2), got 5 at
            index (3,)"); the record is cleared.
        """
        self._check_open()
        self._actions.raise_fault()

    def numpy(self) -> StepViews:
        """The output buffers as numpy arrays (zero-copy on cpu and sim, a copy on cuda)."""
        self._check_open()
        self._raise_deferred_fault()
        buffers = self._buffers
        outputs = (buffers.obs_leaves, buffers.rewards, buffers.terminated, buffers.truncated)
        if self.backend == "cuda":  # copies, read after the kernels queued on torch's current stream
            return self._views(outputs, buffers.read)
        if self._numpy_views is None:
            self._numpy_views = self._views(outputs, to_numpy)
        return self._numpy_views

    def render(self, index: int = 0) -> np.ndarray:
        """An RGB ``(H, W, 3)`` uint8 picture of env ``index`` (the env's renderer)."""
        self._check_open()
        index = self._check_index(index)
        renderer = self.spec.load("render")
        if renderer is None:
            raise NotImplementedError(f"env {self.spec.id!r} has no renderer (its EnvSpec.render is None)")
        state = {name: self._buffers.read(array) for name, array in self.state.items()}
        return renderer(state, index, self.env_params(index))

    def close(self) -> None:
        """Release the buffers; the env cannot be used afterwards (a deferred bad action raises here)."""
        if self._closed:
            return
        try:
            self._raise_deferred_fault()
        finally:
            self._closed = True
            self._state = StateBuffers({})
            # dropped, not kept for the type: every later use raises at _check_open first
            self._launch_step = self._launch_reset = self._launch_check = None  # type: ignore[assignment]
            self._step_launch = None  # type: ignore[assignment]
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

    def _refuse_step(self) -> None:
        self._check_open()
        raise RuntimeError(
            f"{self!r}: step() before reset(); call reset() first to draw start states "
            f"(or set_state for every env; env {min(self._unstarted or ())} has no state yet)"
        )

    def _raise_deferred_fault(self) -> None:
        """A read of results: surface a bad action a deferred check recorded (one host read)."""
        if self._deferred_check:
            self._actions.raise_fault()

    def _views(self, outputs, convert) -> StepViews:
        """`StepViews` of the output buffers through ``convert``, observations as the space's tree."""
        leaves, *flat = outputs
        return StepViews(
            self._buffers.tree({name: convert(leaf) for name, leaf in leaves.items()}),
            *(convert(array) for array in flat),
        )

    def _tensor_outputs(self) -> tuple:
        """``(obs, rewards, terminated, truncated, info)`` as torch views, made on the first call."""
        if self._outputs is None:
            self._outputs = self._buffers.outputs(self.data_manager.data_on_device_via_torch, self.episode_statistics)
        return self._outputs

    def _numpy_info(self) -> dict:
        """The step's ``info`` as numpy arrays (zero-copy on cpu and sim, copies on cuda)."""
        buffers = self._buffers
        data = self.data_manager.device_data
        return buffers.info(lambda name: buffers.read(data(name)), self.episode_statistics)
