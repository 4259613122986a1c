"""Refused steps: what a step with invalid actions must do under the env's value check.

A bad type, dtype or shape raises in ``step`` before any kernel runs, and no env
changes. A bad VALUE (a discrete action out of range, a NaN or infinite continuous one)
is found inside the step launch (``check_action_values``): with ``"sync"`` (the cpu
default) it raises in ``step`` and no env changes; with ``"deferred"`` (the cuda and
sim default) ``step`` returns, the envs with good actions do step, the envs with a bad
one do not, and the error, naming the smallest bad index, is raised at the next read of
results. `refuse` reads it at once with ``check_actions()``, so that no fault outlives
the example or rule that made it (a later read would raise it somewhere unrelated).
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from kernelgym.envs.observations import map_tree
from kernelgym.envs.runtime.actions import check_mode
from kernelgym.envs.testing.harness import StepResult, flat_obs

__all__ = ["bad_envs", "bad_positions", "changes", "deferred", "is_value_fault", "refuse", "snapshot", "step_result"]

OUTPUTS = ("obs", "rewards", "terminated", "truncated")

# the InvalidAction kinds whose values only the in-launch check can see
VALUE_KINDS = ("out_of_range", "non_finite")


def is_value_fault(bad) -> bool:
    """Whether ``bad`` (a `strategies.InvalidAction`) is refused by the in-launch value check."""
    return bad.kind in VALUE_KINDS and bad.expected is ValueError


def deferred(env) -> bool:
    """Whether ``env`` raises a bad value after the step that gave it (a device's deferred check)."""
    return env.backend != "cpu" and check_mode(env.check_action_values, env.backend) == "deferred"


def bad_positions(space: spaces.Space, actions: np.ndarray) -> np.ndarray:
    """Flat indices into ``actions`` of the values outside ``space`` (discrete) or not finite (Box)."""
    actions = np.asarray(actions)
    low: int | np.ndarray
    high: int | np.ndarray
    if isinstance(space, spaces.Discrete):
        low, high = int(space.start), int(space.start + space.n - 1)
    elif isinstance(space, spaces.MultiDiscrete):
        low = np.asarray(space.start, np.int64)  # broadcast over the leading (env, agent) axes
        high = low + np.asarray(space.nvec, np.int64) - 1
    elif isinstance(space, spaces.MultiBinary):
        low, high = 0, 1
    else:
        return np.flatnonzero(~np.isfinite(actions))
    return np.flatnonzero((actions < low) | (actions > high))


def bad_envs(space: spaces.Space, actions: np.ndarray) -> list[int]:
    """The envs of a value fault's batch with at least one bad action."""
    positions = np.unravel_index(bad_positions(space, actions), np.shape(actions))[0]
    return sorted({int(index) for index in positions})


def refuse(env, bad, space: spaces.Space):
    """Step ``env`` with ``bad`` actions and check the refusal (the error type, argument and index).

    Returns
    -------
    tuple or None
        What ``step`` returned when the error was deferred (the envs with good actions
        stepped; read it with `step_result`), None when ``step`` raised (nothing stepped).

    Raises
    ------
    AssertionError
        The wrong error, none, an error that names no argument or the wrong index, or a
        deferred error raised in ``step`` itself or left in the record after it was read.
    """
    value_fault = is_value_fault(bad)
    later = value_fault and deferred(env)
    stepped = where = f"step({bad.kind} actions)"
    outputs = None
    try:
        outputs = env.step(bad.actions)
        if later:
            where = f"check_actions() after {stepped}"
            env.check_actions()
    except bad.expected as error:
        if later and where == stepped:
            raise AssertionError(
                f"{stepped} raised {type(error).__name__} in the step: {error}; a deferred "
                "check must raise it at the next read of results"
            ) from error
        message = str(error)
        assert "actions" in message, f"the error does not name the argument 'actions': {message}"
        if value_fault:
            first = int(bad_positions(space, bad.actions).min())
            index = tuple(int(k) for k in np.unravel_index(first, np.shape(bad.actions)))
            assert f"at index {index}" in message, f"the error does not name the bad index {index}: {message}"
    except Exception as error:
        raise AssertionError(
            f"{where} raised {type(error).__name__}: {error}; expected {bad.expected.__name__}"
        ) from error
    else:
        raise AssertionError(f"{where} raised nothing; expected {bad.expected.__name__}")
    if not later:
        return None
    try:
        env.check_actions()
    except ValueError as error:
        raise AssertionError(f"check_actions() raised a second time, the record was not cleared: {error}") from error
    return outputs


def step_result(env, outputs) -> StepResult:
    """The `StepResult` of a deferred refusal's ``outputs`` (torch views, on the device on cuda)."""
    obs, rewards, terminated, truncated, info = outputs
    arrays = tuple(map_tree(_to_numpy, tensor) for tensor in (obs, rewards, terminated, truncated))
    return StepResult(
        env,
        (
            *arrays,
            {key: map_tree(_to_numpy, value) for key, value in info.items() if key in ("final_obs", "_final_obs")},
        ),
    )


def _to_numpy(tensor) -> np.ndarray:
    return tensor.numpy(force=True)


def snapshot(env) -> tuple[dict, list, np.ndarray]:
    """Host copies of ``env``'s state, outputs and RNG streams (what a refusal leaves alone)."""
    views = env.numpy()
    return (
        env.get_state(),
        [flat_obs(env.single_observation_space, views.obs), *map(np.array, views[1:])],
        env.get_rng_states(),
    )


def changes(before: tuple, after: tuple, index: int) -> list[str]:
    """What differs for env ``index`` between two snapshots (`snapshot`)."""
    (state, outputs, streams), (new_state, new_outputs, new_streams) = before, after
    found = [name for name, value in new_state.items() if not np.array_equal(value[index], state[name][index])]
    found += [
        name
        for name, old, new in zip(OUTPUTS, outputs, new_outputs)
        if not np.array_equal(old[index], new[index], equal_nan=True)
    ]
    return found + ([] if np.array_equal(new_streams[index], streams[index]) else ["rng stream"])
