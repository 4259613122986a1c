"""`EnvHarness`: one env spec on one backend, and the oracle the checks compare with.

The oracle is the env's own exact reference (``EnvSpec.reference``): a stepped env
must land where ``reference.step`` lands from the same state, action and RNG stream
row, a reset env exactly on the state ``reference.reset`` draws from the env's stream
row, and every observation must be ``reference.observe`` of the state it shows. Kernel
and reference draw from the same ``kernelgym.core.rng`` stream, so the comparison is
exact: bitwise on cpu and sim, within `CUDA_TOLERANCE` on cuda (libdevice's
transcendental functions may differ from the host's in the last bits). The RNG row
after the step must match too: a kernel that draws more or less than its reference
is caught. A NaN or inf is compared as a value: the same on both sides is no difference,
one where the reference is finite is (and the checks say where the kernel's source makes
it, see `kernelgym.envs.testing.nonfinite`). An env that declares precisions (`EnvSpec.precisions`) is checked in one of
them: its kernels are compiled for it and its reference runs with ``real`` set to it,
so the comparison stays exact in float32 too.

A ``Dict``/``Tuple`` observation (`kernelgym.envs.observations`) is compared as one flat
row per env (`flat_obs`: its leaves, each flattened, side by side, as float64, which
holds every leaf dtype's values exactly); a problem names the leaves that differ.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from typing import TYPE_CHECKING, cast

import numpy as np
from gymnasium import spaces

from kernelgym.core import resolve_backend
from kernelgym.core.codegen import params_mode_override
from kernelgym.core.cpu_threads import cpu_threads_override
from kernelgym.envs.observations import is_structured, leaf_arrays, leaves, space_shape
from kernelgym.envs.runtime.streams import env_streams, per_agent_streams, seed_env_streams
from kernelgym.envs.spec import PRECISIONS, CPUReference, EnvSpec, reference_reset, resolve_precision
from kernelgym.envs.testing.nonfinite import nonfinite_arrays
from kernelgym.envs.testing.stream_hint import stream_hint

if TYPE_CHECKING:
    from kernelgym.envs.testing.gpu_compile import PendingGpuCompile

__all__ = ["EnvHarness", "StepResult", "checking", "env_slice", "fail_on", "flat_obs"]

# (rtol, atol) of float comparisons with the reference on cuda; cpu and sim are exact
CUDA_TOLERANCE = (1e-5, 1e-6)
RANDOM_START_PROBES = 8  # seeded streams whose reference resets tell whether starts are random


@contextlib.contextmanager
def one_cpu_thread(backend: str):
    """Run cpu kernels on one thread while a check runs (restored afterwards).

    The checks step small batches thousands of times; waking numba's thread team for
    each launch cost 16 ms against 2 ms for the step itself on a busy 2-core machine
    (a 7x slower check). Envs stay independent whatever the thread count, and the
    checks compare every env's rows, so nothing they can find depends on it.
    """
    if backend != "cpu":
        yield
        return
    import numba

    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(threads)


@contextlib.contextmanager
def checking(backend: str):
    """What a check runs under: `one_cpu_thread`, the serial twin only, and params bound as
    launcher arguments.

    The kit builds one env in many params configurations (parity draws them from
    `EnvSpec.param_ranges`, a suite may override them): with params as arguments
    (`kernelgym.core.codegen.params_mode`) they share one compile instead of one each,
    and the steps give the same bits as the constants build users run by default. On one
    thread the thread team's build (the same source, the same bits) is only a second compile
    of each program, twice the serial twin's; and a kit that never runs it can fork its
    children (`kernelgym.envs.testing.child_process.fork_refusal`: GNU OpenMP's pool does
    not survive a fork).
    """
    with one_cpu_thread(backend), cpu_threads_override("one"), params_mode_override("arguments"):
        yield


def fail_on(problems: list[str], what: str) -> None:
    """Raise AssertionError listing ``problems`` under ``what`` (nothing if there are none)."""
    if problems:
        raise AssertionError(f"{what}:\n" + "\n".join(problems))


def env_slice(state: dict, index: int) -> dict:
    """Env ``index``'s part of a batch's state dict."""
    return {name: value[index] for name, value in state.items()}


def flat_obs(space, obs) -> np.ndarray:
    """``obs`` as one array: a Box's as it is; a Dict/Tuple's leaves flattened past their leading
    (batch, agent) axes and joined side by side as float64, in `kernelgym.envs.observations.leaves` order."""
    if not is_structured(space):
        return np.array(obs)
    parts = []
    for leaf in leaves(space):
        value = np.asarray(leaf_arrays(space, obs)[leaf.name])
        lead = value.shape[: value.ndim - len(leaf.shape)]
        parts.append(value.astype(np.float64).reshape(*lead, -1))
    return np.concatenate(parts, axis=-1)


class StepResult:
    """Host copies of everything one ``step`` produced (outputs, info and the new state)."""

    __slots__ = ("obs", "rewards", "terminated", "truncated", "final_obs", "final_mask", "state", "rng")

    def __init__(self, env, outputs):
        obs, rewards, terminated, truncated, info = outputs
        space = env.single_observation_space
        self.obs = flat_obs(space, obs)
        self.rewards = np.array(rewards)
        self.terminated = np.array(terminated)
        self.truncated = np.array(truncated)
        self.final_obs = flat_obs(space, info["final_obs"]) if "final_obs" in info else None
        self.final_mask = np.array(info["_final_obs"]) if "_final_obs" in info else None
        self.state = env.get_state()
        self.rng = env.get_rng_states()

    def env_slice(self, index: int) -> dict:
        return env_slice(self.state, index)

    def differences(self, other: StepResult, index: int) -> list[str]:
        """Names of what differs, bitwise, between two results for env ``index``."""
        found = []
        for name in ("obs", "rewards", "terminated", "truncated"):
            if not _same_bits(getattr(self, name)[index], getattr(other, name)[index]):
                found.append(name)
        for name, value in self.state.items():
            if not _same_bits(value[index], other.state[name][index]):
                found.append(f"state {name!r}")
        return found


class EnvHarness:
    """An env spec made concrete for one backend and one params record.

    Parameters
    ----------
    env : str or EnvSpec
        A registered env id, ``"module:attr"`` of a spec, or a spec (registered or not).
    backend : {"auto", "cpu", "sim", "cuda"}
    params : dict, params record or None
        Overrides of the spec's params (a dict), a complete params record, or None
        for the spec's defaults.
    rtol, atol : float, optional
        Tolerances for floating-point comparisons with the reference on cuda
        (default `CUDA_TOLERANCE`); cpu and sim compare exactly unless given.
        Integers and bools are always compared exactly.
    precision : {"float64", "float32"} or None
        For an env that declares precisions: the one its kernels and its reference
        run in (None: the env's default).
    """

    def __init__(
        self,
        env,
        backend: str | None = "auto",
        params=None,
        rtol: float | None = None,
        atol: float | None = None,
        precision: str | None = None,
    ):
        # "module:attr" names a spec not registered (yet); the GPU-compile child imports it by that name
        self.importable = env if isinstance(env, str) and ":" in env else None
        # `check_env` starts the gpu_compile check's child process before the other checks
        self.gpu_compile_started: PendingGpuCompile | None = None
        if self.importable is not None:
            from kernelgym.envs.spec import load_reference

            env = load_reference(env)
        elif isinstance(env, str):
            from kernelgym.envs.registry import get_spec

            env = get_spec(env)
        if not isinstance(env, EnvSpec):
            raise TypeError(f"env: expected an env id (str) or an EnvSpec, got {type(env).__name__} {env!r}")
        self.spec = env
        self.precision = resolve_precision(env, precision)
        self.backend = resolve_backend(backend)
        default = CUDA_TOLERANCE if self.backend == "cuda" else (0.0, 0.0)
        rtol, atol = (default[k] if value is None else value for k, value in enumerate((rtol, atol)))
        for name, value in (("rtol", rtol), ("atol", atol)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise ValueError(f"{name}: expected a number >= 0, got {value!r}")
        if params is None or isinstance(params, dict):
            self.overrides: dict | None = dict(params or {})
            self.params = env.make_params(**self.overrides)
        else:
            self.params = params
            self.overrides = None
        resolved = env.resolve(self.params)
        self.num_agents = resolved.num_agents
        self.observation_space = resolved.observation_space
        self.action_space = resolved.action_space
        self.max_episode_steps = resolved.max_episode_steps
        self.state_shapes = resolved.state_shapes
        self.state_dtypes = {array.name: array.dtype for array in env.state}
        self.reference = _in_precision(env.load("reference"), self.precision)
        self.invariants = env.load("invariants")
        self.rtol, self.atol = float(rtol), float(atol)
        self.agent_shape = (self.num_agents,) if self.num_agents > 1 else ()
        # set by the out_of_bounds check: on cpu and cuda such writes corrupt memory that
        # other checks would then use, so they must not run
        self.out_of_bounds_found = False
        self._envs: dict = {}
        self._unstarted: dict = {}
        self._variants: dict = {}

    @property
    def memory_unsafe(self) -> bool:
        """Whether out-of-bounds writes were found where nothing stops them (not the simulator)."""
        return self.out_of_bounds_found and self.backend != "sim"

    def __repr__(self):
        return f"EnvHarness({self.spec.id!r}, backend={self.backend!r})"

    def with_params(self, drawn: dict) -> EnvHarness:
        """This harness with the params overrides ``drawn`` added to its own (cached per overrides).

        ``drawn`` is what the kit drew from `EnvSpec.param_ranges`; the harness's own
        overrides (``--param``) win, as the user fixed them.
        """
        if not drawn:
            return self
        if self.overrides is None:
            raise TypeError(f"{self!r}.with_params: the harness was built from a complete params record")
        overrides = {**drawn, **self.overrides}
        key = tuple(sorted(overrides.items()))
        variant = self._variants.get(key)
        if variant is None:
            variant = self._variants[key] = EnvHarness(
                self.spec, self.backend, params=overrides, rtol=self.rtol, atol=self.atol, precision=self.precision
            )
        return variant

    # ------------------------------------------------------------------------ envs
    def make_env(
        self,
        num_envs: int,
        seed: int = 0,
        autoreset_mode: str = "next_step",
        max_episode_steps: int | None = None,
        fresh: bool = False,
    ):
        """A `KernelVectorEnv` of this spec, reset with ``seed``.

        Envs are cached per (size, mode, time limit) unless ``fresh``; a cached env is
        re-seeded by ``reset(seed=...)``, which restarts it completely.
        """
        from kernelgym.envs.vector_env import KernelVectorEnv

        key = (num_envs, autoreset_mode, max_episode_steps)
        env = None if fresh else self._envs.get(key)
        if env is None:
            # a complete params record is handed to the runtime field by field
            kwargs = self.overrides if self.overrides is not None else _fields(self.params)
            env = KernelVectorEnv(
                self.spec,
                num_envs,
                backend=self.backend,
                seed=seed,
                autoreset_mode=autoreset_mode,
                max_episode_steps=max_episode_steps,
                precision=self.precision,
                **kwargs,
            )
            if not fresh:
                self._envs[key] = env
        kept = {
            array.name: np.full(env.state[array.name].shape, array.initial, array.dtype)
            for array in self.spec.state
            if array.keep_on_reset
        }
        if kept:  # a reset keeps them: a cached env starts anew only with them written back
            env.set_state(kept, keep_episode_step=True)
        env.reset(seed=seed, numpy=True)
        return env

    def unstarted_env(self, num_envs: int):
        """A `KernelVectorEnv` of ``num_envs`` envs in NEXT_STEP mode, made (its programs bound) but
        never reset or stepped: the canary binds its plan to padded buffers (cached per size)."""
        from kernelgym.envs.vector_env import KernelVectorEnv

        env = self._unstarted.get(num_envs)
        if env is None:
            kwargs = self.overrides if self.overrides is not None else _fields(self.params)
            env = self._unstarted[num_envs] = KernelVectorEnv(
                self.spec, num_envs, backend=self.backend, max_episode_steps=1, precision=self.precision, **kwargs
            )
        return env

    def step(self, env, actions) -> StepResult:
        """Step ``env`` with numpy ``actions`` and return host copies of what it produced."""
        return StepResult(env, env.step(actions, numpy=True))

    def stack_states(self, states) -> dict[str, np.ndarray]:
        """Single-env state dicts stacked into a batch in the spec's dtypes."""
        return {
            name: np.stack([np.asarray(state[name]) for state in states]).astype(dtype, copy=False)
            for name, dtype in self.state_dtypes.items()
        }

    def load_batch(self, env, batch, seed: int) -> dict[str, np.ndarray]:
        """Put a `strategies.Batch` into ``env`` through the public API; returns the state.

        ``env`` must have a time limit of 1 step: one step from the batch's states flags
        every env for a reset, and ``set_state`` clears the flag again for the envs that
        should step. The step is taken even when no env is pending, so that every env's
        RNG stream is in the same place whatever the other envs' flags are.
        """
        if env.max_episode_steps != 1:
            raise ValueError(f"load_batch env: expected max_episode_steps=1, got {env.max_episode_steps}")
        env.reset(seed=seed, numpy=True)
        stacked = self.stack_states(batch.states)
        # drawn and reached states alike: a broken invariant is the invariants check's finding
        env.set_state(stacked, check_invariants=False)
        env.step(batch.actions, numpy=True)
        for index, pending in enumerate(batch.pending):
            if not pending:
                env.set_state(env_slice(stacked, index), index=index, check_invariants=False)
        return env.get_state()

    def episode_steps(self, state: dict | None):
        """Where ``set_state(state)`` starts the runtime's episode step counter.

        The values of the spec's ``episode_step`` array (one env's or the batch's,
        as int64), or 0 when the spec names none or ``state`` is None (a reset).
        """
        name = self.spec.episode_step
        if name is None or state is None:
            return 0
        return np.asarray(state[name], dtype=np.int64)

    # ------------------------------------------------------------------- reference
    def reference_step(self, state: dict, action, rng_row) -> tuple[dict, np.ndarray, bool, np.ndarray]:
        """``reference.step`` on one env from stream row ``rng_row``; also returns the row after it.

        Checks that the reference leaves its input state alone.
        """
        # each array's bytes, to see that the reference left them alone (bytes: the cheapest copy
        # to take and compare, on the long horizon's tens of thousands of replayed steps)
        before = {name: _contents(value) for name, value in state.items()}
        stream = env_streams(rng_row)
        new_state, reward, terminated = self.reference.step(self.params, state, action, stream)
        changed = [name for name in before if before[name] != _contents(state[name])]
        if changed:
            raise AssertionError(
                f"the CPU reference's step modified its input state {changed}; it must return a new one"
            )
        reward = np.asarray(reward, dtype=np.float64).reshape(self.agent_shape)
        return new_state, reward, bool(terminated), stream.reshape(np.shape(rng_row))

    def reference_reset(self, rng_row, kept: dict | None = None) -> tuple[dict, np.ndarray]:
        """``reference.reset`` from stream row ``rng_row``: the start state and the row after it.

        ``kept``: the env's ``keep_on_reset`` arrays before the reset (None: their initial values).
        """
        stream = env_streams(rng_row)
        state = reference_reset(self.spec, self.reference.reset, self.params, stream, kept)
        missing = sorted(set(self.state_shapes) - set(state))
        if missing:
            raise AssertionError(f"the CPU reference's reset returned no {missing}; it returned {sorted(state)}")
        for name, shape in self.state_shapes.items():
            if np.shape(state[name]) != shape:
                raise AssertionError(
                    f"the CPU reference's reset returned {name!r} of shape "
                    f"{np.shape(state[name])}; the spec says {shape}"
                )
        return state, stream.reshape(np.shape(rng_row))

    @property
    def obs_shape(self) -> tuple[int, ...]:
        """One env's observation shape as the checks see it (`flat_obs`: one row for a Dict/Tuple)."""
        space = self.observation_space
        if not is_structured(space):
            return (*self.agent_shape, *space_shape(space))
        return (*self.agent_shape, sum(int(np.prod(leaf.shape)) for leaf in leaves(space)))

    def obs_buffers(self, num_envs: int, agent_shape=None) -> dict[str, np.ndarray]:
        """Zeroed observation buffers for ``num_envs`` envs by the names kernels bind (``obs``, or each
        leaf's), with ``agent_shape`` (default the harness's) after the env axis."""
        space = self.observation_space
        agents = self.agent_shape if agent_shape is None else tuple(agent_shape)
        found = leaves(space) if is_structured(space) else [("", "obs", space)]
        return {
            name: np.zeros((num_envs, *agents, *space_shape(leaf_space)), leaf_space.dtype)
            for _, name, leaf_space in found
        }

    def reference_observe(self, state: dict) -> np.ndarray:
        observed = self.reference.observe(self.params, state)
        if is_structured(self.observation_space):
            self._check_observed_tree(observed)
        return flat_obs(self.observation_space, observed)

    def _check_observed_tree(self, observed) -> None:
        """The reference's observation holds every leaf, each with the space's shape."""
        space = self.observation_space
        try:
            found = leaf_arrays(space, observed)
        except (KeyError, IndexError, TypeError) as error:
            raise AssertionError(
                f"the CPU reference's observe returned {type(observed).__name__} {observed!r}; "
                f"expected a tree shaped as {space} ({error!r})"
            ) from error
        for leaf in leaves(space):
            if np.shape(found[leaf.name]) != (*self.agent_shape, *leaf.shape):
                raise AssertionError(
                    f"the CPU reference's observe returned {leaf.name} of shape "
                    f"{np.shape(found[leaf.name])}; the space says {(*self.agent_shape, *leaf.shape)}"
                )

    def leaf_names_differing(self, obs, expected) -> list[str]:
        """For a Dict/Tuple space: the leaves whose flat parts of ``obs`` and ``expected`` differ."""
        names, start = [], 0
        for leaf in leaves(self.observation_space):
            size = int(np.prod(leaf.shape))
            part = (..., slice(start, start + size))
            if not self._close(np.asarray(obs, np.float64)[part], expected[part]):
                names.append(leaf.name)
            start += size
        return names

    @functools.cached_property
    def random_start(self) -> bool:
        """Whether the reference draws start states at random (else every start is the same)."""
        rows = self.seed_streams(0, RANDOM_START_PROBES)
        starts = [self.reference_reset(row)[0] for row in rows]
        return any(
            not _same_bits(np.asarray(start[name]), np.asarray(starts[0][name]))
            for start in starts[1:]
            for name in self.state_shapes
        )

    @functools.cached_property
    def reset_draws(self) -> bool:
        """Whether the reference's reset draws from its stream (its start may be random even when
        `random_start` saw the same start from every probe)."""
        rows = self.seed_streams(0, RANDOM_START_PROBES)
        return any(not _same_bits(self.reference_reset(row)[1], np.asarray(row)) for row in rows)

    def seed_streams(self, seed, num_envs: int) -> np.ndarray:
        """The RNG streams ``make_env(num_envs, seed)`` starts with: ``(num_envs, 2)``, or one per
        (env, agent) for agent-layout envs (`kernelgym.envs.runtime.streams`)."""
        return seed_env_streams(self.spec, seed, num_envs, self.num_agents)

    # ---------------------------------------------------------------------- oracle
    def start_state_problems(self, state: dict, rng_row, rng_after=None, previous: dict | None = None) -> list[str]:
        """Differences between ``state`` and the start state the reference draws from ``rng_row``.

        ``rng_after``, when given, must be the stream row the reference's reset leaves.
        ``previous``: the env's state before the reset, whose ``keep_on_reset`` arrays the
        reset must keep (None: those of ``state`` are taken as kept).
        """
        expected, expected_rng = self.reference_reset(rng_row, self._kept(state if previous is None else previous))
        problems = [
            text.replace(", reference ", " is no start state: reference reset gives ")
            for text in self.state_differences(state, expected)
        ]
        if rng_after is not None and not _same_bits(np.asarray(rng_after), expected_rng):
            problems.append(
                f"rng_states row {_show(rng_after)} after the reset, the reference's reset "
                f"leaves {_show(expected_rng)} ({self._stream_hint(rng_row, rng_after, expected_rng)})"
            )
        return problems

    def step_problems(
        self, prev: dict, action, rng_row, new_state: dict, obs, reward, terminated, rng_after=None
    ) -> list[str]:
        """Differences between a stepped env and ``reference.step`` from ``prev`` and ``rng_row``."""
        expected_state, expected_reward, expected_terminated, expected_rng = self.reference_step(prev, action, rng_row)
        problems = self.state_differences(new_state, expected_state)
        problems += self._reward_problems(reward, expected_reward)
        if bool(terminated) != expected_terminated:
            problems.append(f"terminated {bool(terminated)}, reference {expected_terminated}")
        if rng_after is not None and not _same_bits(np.asarray(rng_after), expected_rng):
            problems.append(
                f"rng_states row {_show(rng_after)} after the step, the reference's step "
                f"leaves {_show(expected_rng)} ({self._stream_hint(rng_row, rng_after, expected_rng)})"
            )
        return problems + self.observation_problems(obs, new_state)

    def final_step_problems(
        self, prev: dict, action, rng_row, final_obs, reward, terminated
    ) -> tuple[list[str], np.ndarray]:
        """SAME_STEP: the last step of an episode (its state is gone, reset in the same step).

        Returns the problems and the stream row the reference's step leaves (where the
        same-step reset draws from).
        """
        expected_state, expected_reward, expected_terminated, expected_rng = self.reference_step(prev, action, rng_row)
        problems = ["final observation: " + text for text in self.observation_problems(final_obs, expected_state)]
        problems += self._reward_problems(reward, expected_reward)
        if bool(terminated) != expected_terminated:
            problems.append(f"terminated {bool(terminated)}, reference {expected_terminated}")
        return problems, expected_rng

    def _kept(self, state: dict) -> dict | None:
        """The ``keep_on_reset`` arrays of one env's ``state`` (None when the spec has none)."""
        kept = {array.name: np.asarray(state[array.name]) for array in self.spec.state if array.keep_on_reset}
        return kept or None

    def _stream_hint(self, before, kernel_after, reference_after) -> str:
        return stream_hint(before, kernel_after, reference_after, per_agent_streams(self.spec))

    def _reward_problems(self, reward, expected) -> list[str]:
        # rewards are stored as float32: the reference's reward is compared as stored
        expected = np.asarray(expected, np.float64).astype(np.float32)
        if self._close(np.asarray(reward, np.float64), expected):
            return []
        return [f"reward {_show(reward)}, reference {_show(np.float32(expected))}"]

    def reset_problems(
        self, new_state: dict, obs, reward, terminated, rng_row, rng_after=None, previous: dict | None = None
    ) -> list[str]:
        """What is wrong with an env that should have just been reset from stream row ``rng_row``
        (``previous``: its state before, see `start_state_problems`)."""
        problems = self.start_state_problems(new_state, rng_row, rng_after, previous)
        if np.any(np.asarray(reward) != 0):
            problems.append(f"reward {_show(reward)} on a reset step, expected 0")
        if bool(terminated):
            problems.append("terminated True on a reset step, expected False")
        problems += self.observation_problems(obs, new_state)
        return problems

    def observation_problems(self, obs, state: dict) -> list[str]:
        """``obs`` is not ``reference.observe(state)``."""
        expected = self.reference_observe(state)
        if np.shape(obs) != expected.shape or not self._close(np.asarray(obs, np.float64), expected):
            where = ""
            if is_structured(self.observation_space) and np.shape(obs) == expected.shape:
                where = f" (leaves {self.leaf_names_differing(obs, expected)} differ; leaves side by side)"
            return [f"observation {_show(obs)}, reference.observe gives {_show(expected.astype(np.float32))}{where}"]
        return []

    def state_differences(self, state: dict, expected: dict) -> list[str]:
        problems = []
        for name, dtype in self.state_dtypes.items():
            value, want = np.asarray(state[name]), np.asarray(expected[name])
            if value.shape != want.shape:
                problems.append(f"state {name!r} has shape {value.shape}, reference {want.shape}")
            elif not self._close(value.astype(np.float64), want.astype(np.float64), exact=not _is_float(dtype)):
                problems.append(f"state {name!r} = {_show(value)}, reference {_show(want.astype(dtype))}")
        return problems

    def space_problems(self, obs, reward) -> list[str]:
        """Observation outside the observation space, or NaN/inf in obs or reward."""
        problems = []
        obs = np.asarray(obs)
        if not np.all(np.isfinite(obs)):
            problems.append(f"observation {_show(obs)} has NaN or inf")
        elif is_structured(self.observation_space):
            problems += self._leaf_space_problems(obs)
        else:
            space = cast(spaces.Box, self.observation_space)  # an array observation is a Box
            if obs.dtype != space.dtype:
                problems.append(f"observation dtype {obs.dtype}, the observation space says {space.dtype}")
            if np.any(obs < space.low) or np.any(obs > space.high):
                problems.append(f"observation {_show(obs)} outside the observation space {space}")
        if not np.all(np.isfinite(reward)):
            problems.append(f"reward {_show(reward)} has NaN or inf")
        return problems

    def _leaf_space_problems(self, obs) -> list[str]:
        """A flat row (`flat_obs`) of a Dict/Tuple observation: each leaf inside its own space."""
        problems, start = [], 0
        rows = obs.reshape(-1, obs.shape[-1])  # one per agent
        for leaf in leaves(self.observation_space):
            size = int(np.prod(leaf.shape))
            for row in rows:
                value = row[start : start + size].reshape(leaf.shape).astype(leaf.dtype)
                if not leaf.space.contains(value) or not np.array_equal(
                    value, row[start : start + size].reshape(leaf.shape)
                ):
                    problems.append(
                        f"observation leaf {leaf.name} {_show(row[start : start + size])} outside its "
                        f"space {leaf.space}"
                    )
                    break
            start += size
        return problems

    def nonfinite_state_problems(self, state: dict) -> list[str]:
        """NaN or inf in one env's float state arrays."""
        return [f"state {name!r} = {_show(state[name])} has NaN or inf" for name in nonfinite_arrays(state)]

    def invariant_problems(self, state: dict) -> list[str]:
        """The spec's declared invariants (``EnvSpec.invariants``) broken by ``state``."""
        if self.invariants is None:
            return []
        try:
            self.invariants(self.params, state)
        except AssertionError as error:
            return [f"invariant broken: {error} (state {_state_text(state)})"]
        return []

    def _close(self, value, expected, exact: bool = False) -> bool:
        """Whether every element of ``value`` matches ``expected`` (within tolerance for floats)."""
        value, expected = np.asarray(value, np.float64), np.asarray(expected, np.float64)
        return value.shape == expected.shape and bool(np.all(self._close_elements(value, expected, exact)))

    def _close_elements(self, value, expected, exact: bool = False) -> np.ndarray:
        if exact or self.rtol == self.atol == 0.0:
            # exact, NaN included: a NaN the reference also gives is no difference
            return (value == expected) | (np.isnan(value) & np.isnan(expected))
        # a NaN (or inf) the reference also gives is no difference; one where it is finite is
        return np.isclose(value, expected, rtol=self.rtol, atol=self.atol, equal_nan=True)

    def env_problem(self, index: int, problems: list[str], prev: dict | None = None, action=None) -> str:
        """A readable account of env ``index``'s problems, with its input."""
        lines = [f"env {index}: " + "; ".join(problems)]
        if prev is not None:
            lines.append(f"  from state {_state_text(prev)}")
        if action is not None:
            lines.append(f"  with action {_show(action)}")
        return "\n".join(lines)


def _in_precision(reference, precision: str | None):
    """``reference`` with its functions' keyword ``real`` set to ``precision``'s scalar type."""
    if precision is None:
        return reference
    real = PRECISIONS[precision]
    return CPUReference(*(functools.partial(function, real=real) for function in reference))


def _fields(params) -> dict:
    return {} if params is None else {field.name: getattr(params, field.name) for field in dataclasses.fields(params)}


def _is_float(dtype) -> bool:
    return np.dtype(dtype).kind == "f"


def _contents(value) -> tuple:
    """``value``'s shape and bytes: equal for an array left as it was."""
    return np.shape(value), np.asarray(value).tobytes()


def _same_bits(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _show(value) -> str:
    return np.array2string(np.asarray(value), separator=", ", threshold=24, precision=8)


def _state_text(state: dict) -> str:
    return "{" + ", ".join(f"{name}: {_show(value)}" for name, value in state.items()) + "}"
