"""Reading and writing env state from the host: ``get_state``, ``set_state``, RNG streams."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from kernelgym.envs.runtime.buffers import Buffers
    from kernelgym.envs.spec import EnvSpec

    class _EnvsParams(Protocol):
        """What set_state reads of `kernelgym.envs.runtime.params.ParamsTable` (which imports
        this module: naming it here would make an import cycle)."""

        def envs_params(self, read, indices) -> list: ...

    class _EnvState(Protocol):
        """What the `StateIO` mixin reads from `KernelVectorEnv` (for type checkers only)."""

        spec: EnvSpec
        num_envs: int
        params: Any
        _params_table: _EnvsParams | None
        _state_bounds: dict
        _buffers: Buffers
        _unstarted: set[int] | None

        @property
        def state(self) -> StateBuffers: ...

        def _check_open(self) -> None: ...

        def _raise_deferred_fault(self) -> None: ...

    _MixinBase = _EnvState
else:
    _MixinBase = object  # the Protocol types the mixin; at run time it is a plain class

__all__ = ["StateBuffers", "StateIO", "NO_TIME_LIMIT", "checked_cast"]

# Stands in for "no time limit" in the bookkeeping (episode steps are int32).
NO_TIME_LIMIT = np.iinfo(np.int32).max


class StateBuffers(Mapping):
    """``env.state``: the state buffers by name, read-only.

    The kernels are bound to these very buffers, so rebinding an entry would leave
    `get_state` and the kernels on different arrays: it raises instead. The buffers
    themselves stay writable in place.
    """

    __slots__ = ("_buffers",)

    def __init__(self, buffers: dict):
        self._buffers = buffers

    def __getitem__(self, name):
        return self._buffers[name]

    def __iter__(self):
        return iter(self._buffers)

    def __len__(self):
        return len(self._buffers)

    def __setitem__(self, name, value):
        raise TypeError(
            f"state[{name!r}]: the env's state buffers cannot be rebound (its kernels are bound to "
            f"them); write values with set_state({{{name!r}: values}}) or in place "
            f"(env.state[{name!r}][...] = values)"
        )

    def __delitem__(self, name):
        raise TypeError(f"state[{name!r}]: the env's state buffers cannot be removed")

    def __repr__(self):
        return f"StateBuffers({self._buffers!r})"


def checked_cast(value: np.ndarray, dtype, argument: str) -> np.ndarray:
    """``value`` as ``dtype``, refused when the cast would change it beyond rounding.

    A safe cast passes as it is. Otherwise integers must lie in the integer dtype's range
    (no wrap-around) and finite floats must stay finite (no overflow to infinity);
    NaN and infinity given as such are kept. Floats into integers and anything into
    bool are refused.

    Raises
    ------
    TypeError
        A dtype that does not cast to ``dtype`` even with a check.
    ValueError
        A value that ``dtype`` cannot hold, named with ``argument``.
    """
    dtype = np.dtype(dtype)
    if np.can_cast(value.dtype, dtype, casting="safe"):
        return value.astype(dtype, copy=False)
    if value.dtype.kind not in "biuf" or dtype.kind not in "iuf" or (value.dtype.kind == "f" and dtype.kind != "f"):
        raise TypeError(f"{argument}: expected dtype {dtype} (or one that casts to it safely), got {value.dtype}")
    if dtype.kind in "iu":
        limits = np.iinfo(dtype)
        outside = (value < limits.min) | (value > limits.max)
        if np.any(outside):
            bad = value[outside].reshape(-1)[0].item()
            raise ValueError(
                f"{argument}: expected values in [{limits.min}, {limits.max}] ({dtype}), got {bad!r}, "
                f"which {dtype} cannot hold"
            )
        return value.astype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        cast = value.astype(dtype)
    overflow = np.isfinite(value) & ~np.isfinite(cast)
    if np.any(overflow):
        bad = value[overflow].reshape(-1)[0].item()
        raise ValueError(
            f"{argument}: got {bad!r}, which overflows {dtype} (finite values up to "
            f"{np.finfo(dtype).max:g} in magnitude)"
        )
    return cast


class StateIO(_MixinBase):
    """The host-side state methods of `KernelVectorEnv` (a mixin: it uses the env's buffers)."""

    # envs without a state yet, None once all have one (declared here too: this mixin sets it)
    _unstarted: set[int] | None

    def get_state(self, index: int | None = None) -> dict[str, np.ndarray]:
        """A host copy of the state arrays (all envs, or env ``index``'s slice)."""
        self._check_open()
        self._raise_deferred_fault()
        if index is None:
            return {name: np.array(self._buffers.read(array)) for name, array in self.state.items()}
        index = self._check_index(index)
        return {name: np.array(self._buffers.read(array)[index]) for name, array in self.state.items()}

    def set_state(
        self, state: dict, index: int | None = None, keep_episode_step: bool = False, check_invariants: bool = True
    ) -> None:
        """Write state values into every env (``index=None``) or into env ``index``.

        ``state`` holds any subset of the state arrays, each with its per-env shape (or
        the full batch shape when ``index`` is None), of a dtype that casts safely or of
        values the array's dtype holds (no integer wrap-around, no finite float turned
        infinite: `checked_cast`) and within the array's declared bounds
        (`StateArray.low`/``high``: a kernel may index with them); the others keep their
        values. Each env's resulting state must then keep the spec's ``invariants``
        (`EnvSpec.invariants`; checked for every env written that has a full state: one
        already started, or one given every array). Every value is checked before
        anything is written: a refused call writes nothing.

        By default the env(s) written are not pending a reset, and their episode step
        counter (which truncates at ``max_episode_steps``) starts from the value of the
        state array named by ``spec.episode_step`` when the spec names one (given here,
        else its current value; the env is then that many steps into its episode), else
        from 0. The episode statistics follow the same rule: the return of the episode
        that then ends sums the rewards from ``set_state`` on, and its length counts the
        steps from the counter's start, so ``set_state`` begins a new episode for both.
        ``keep_episode_step=True`` writes the values only: the counter, the running
        return and any pending reset stay as they are (a trainer changing an env
        mid-episode, e.g. a ``keep_on_reset`` array): the episode goes on, for both. An env counts as
        started for the "step before reset" check once every state array was written (or it was reset).
        ``check_invariants=False`` skips the invariants (not the dtype and bound checks, which
        keep kernels in memory): for a state the kernels themselves reached, written back as
        it was (the testing kit does, and reports broken invariants as findings of its own).
        """
        self._check_open()
        if not isinstance(state, dict):
            raise TypeError(f"state: expected a dict of arrays, got {type(state).__name__}")
        if not isinstance(keep_episode_step, (bool, np.bool_)):
            raise TypeError(f"keep_episode_step: expected True or False, got {keep_episode_step!r}")
        if not isinstance(check_invariants, (bool, np.bool_)):
            raise TypeError(f"check_invariants: expected True or False, got {check_invariants!r}")
        unknown = sorted(set(state) - set(self.state))
        if unknown:
            raise KeyError(f"state: expected keys among {sorted(self.state)}; unknown {unknown}")
        if index is not None:
            index = self._check_index(index)
        if keep_episode_step and self.spec.episode_step in state:
            raise ValueError(
                f"state[{self.spec.episode_step!r}]: the env's own episode step count "
                f"(spec.episode_step) must agree with the runtime's; keep_episode_step=True keeps "
                f"the runtime's, so leave it out"
            )
        checked = {}
        for name, value in state.items():
            target = self.state[name]
            value = np.asarray(value)
            expected = target.shape if index is None else target.shape[1:]
            if value.shape != expected:
                raise ValueError(f"state[{name!r}]: expected shape {expected}, got {value.shape}")
            checked[name] = checked_cast(value, target.dtype, f"state[{name!r}]")
            self._check_bounds(name, checked[name], index)
        episode_steps = None if keep_episode_step else self._episode_steps(checked, index)
        if check_invariants:
            self._check_invariants(checked, index)
        for name, value in checked.items():
            self._buffers.write_rows(self.state[name], value, index)
        if not keep_episode_step:  # a new episode: its step counter and its return start here
            running_returns = self._buffers.statistics["running_returns"]
            for buffer, value in (
                (self._buffers.reset_mask, 0),
                (self._buffers.timestep, episode_steps),
                (running_returns, 0),
            ):
                self._buffers.write_rows(buffer, value, index)
        if len(checked) == len(self.state):
            self._mark_started(index)

    def _check_bounds(self, name: str, value: np.ndarray, index: int | None) -> None:
        """Refuse a value of state array ``name`` outside its declared bounds, naming the env and the bound."""
        for side, bound in zip(("low", "high"), self._state_bounds[name]):
            if bound is None:
                continue
            # NaN compares False both ways: it passes (it is no index; the dtype check admits it)
            outside = value < bound if side == "low" else value > bound
            if not np.any(outside):
                continue
            where = np.argwhere(outside)[0]
            env = int(where[0]) if index is None else index
            element = tuple(int(k) for k in (where[1:] if index is None else where))
            limit = np.broadcast_to(bound, outside.shape[1:] if index is None else outside.shape)[element].item()
            bad = value[tuple(where)].item()
            at = f"[{', '.join(map(str, element))}]" if element else ""
            raise ValueError(
                f"state[{name!r}]{at} of env {env}: expected {'>=' if side == 'low' else '<='} {limit!r} "
                f"(StateArray {name!r} {side} of {self.spec.id!r}), got {bad!r}; nothing was written"
            )

    def _check_invariants(self, checked: dict, index: int | None) -> None:
        """Refuse a write after which an env breaks the spec's invariants, naming the env and the rule.

        An env not yet started that is given only some arrays is not checked: the rest of
        its state is still the zeros it was made with (it steps only after a full write or a
        reset, and a reset writes every array).
        """
        invariants = self.spec.load("invariants")
        if invariants is None:
            return
        complete = len(checked) == len(self.state)
        envs = list(range(self.num_envs)) if index is None else [index]
        envs = [env for env in envs if complete or self._unstarted is None or env not in self._unstarted]
        if not envs:
            return
        # the arrays not given keep their values: the rule sees each env's state as it would be
        kept = [name for name in self.state if name not in checked]
        current = {name: np.array(self._buffers.read(self.state[name])) for name in kept}
        table = self._params_table
        params = [self.params] * len(envs) if table is None else table.envs_params(self._buffers.read, envs)
        for env, env_params in zip(envs, params):
            state = {name: np.array(value if index is not None else value[env]) for name, value in checked.items()}
            state.update({name: np.array(value[env]) for name, value in current.items()})
            try:
                invariants(env_params, state)
            except AssertionError as error:
                broken = str(error) or "an assert without a message"
                raise ValueError(
                    f"state of env {env}: expected a state that keeps the invariants of {self.spec.id!r} "
                    f"(EnvSpec.invariants), got one that breaks them: {broken}; nothing was written"
                ) from error

    def _mark_started(self, index: int | None) -> None:
        """Envs ``index`` (all for None) have a state: ``step`` may run once every env has one."""
        if self._unstarted is None:
            return
        if index is None:
            self._unstarted = None
            return
        self._unstarted.discard(index)
        if not self._unstarted:
            self._unstarted = None

    def get_rng_states(self, index: int | None = None) -> np.ndarray:
        """A host copy of the RNG streams: ``(num_envs, 2)`` uint64, or env ``index``'s ``(2,)`` row.

        Env ``i`` draws only from row ``i`` (`kernelgym.core.rng`), in kernels and in
        the env's exact CPU reference alike. An agent-layout env has one stream per
        (env, agent): ``(num_envs, num_agents, 2)``, env ``index``'s ``(num_agents, 2)``
        (`kernelgym.envs.runtime.streams`).
        """
        self._check_open()
        rows = np.array(self._buffers.read(self._buffers.rng_states))
        return rows if index is None else rows[self._check_index(index)]

    def set_rng_states(self, states, index: int | None = None) -> None:
        """Write RNG stream rows (all envs, or env ``index``'s rows; shapes as `get_rng_states`); never an
        all-zero row."""
        self._check_open()
        states = np.asarray(states)
        expected = tuple(self._buffers.rng_states.shape)
        expected = expected if index is None else expected[1:]
        if states.shape != expected or states.dtype != np.uint64:
            raise ValueError(f"states: expected uint64 of shape {expected}, got {states.dtype} {states.shape}")
        if np.any(np.all(states.reshape(-1, 2) == 0, axis=1)):
            raise ValueError("states: an all-zero row never leaves zero (xoroshiro128+); got one")
        self._buffers.write_rows(self._buffers.rng_states, states, None if index is None else self._check_index(index))

    def _episode_steps(self, state: dict, index: int | None):
        """Where ``set_state`` starts the episode step counter: the ``spec.episode_step`` values (given, else
        current), else 0."""
        name = self.spec.episode_step
        if name is None:
            return 0
        if name in state:
            steps = state[name]
        else:
            current = np.array(self._buffers.read(self.state[name]))
            steps = current if index is None else current[index]
        if steps.dtype.kind not in "iu" or np.any(steps < 0) or np.any(steps >= NO_TIME_LIMIT):
            raise ValueError(
                f"state[{name!r}]: the episode step count (spec.episode_step) must be integers in "
                f"[0, {NO_TIME_LIMIT}), got {steps.dtype} values from {int(steps.min())} to {int(steps.max())}"
            )
        return steps.astype(np.int32)

    def _check_index(self, index) -> int:
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise TypeError(f"index: expected an int, got {type(index).__name__} {index!r}")
        if not 0 <= index < self.num_envs:
            raise IndexError(f"index: expected 0 <= index < {self.num_envs}, got {index}")
        return int(index)
