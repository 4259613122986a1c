"""Kernels the data manager launches itself: per-env reset and per-step episode logs.

The reset bodies are bound by name (see `kernelgym.core.binding`).

Both take tuples of raw views (see `kernelgym.core.arrays.byte_view`): ``uint64``
words for arrays whose rows are a multiple of 8 bytes, ``uint8`` bytes for the rest. So
one launch handles any number of arrays of any dtype and any number of dims, and copies
are exact.
"""

from kernelgym.core.device_functions import device_function
from kernelgym.core.kernels import env_kernel


@device_function
def copy_env_rows(env, destinations, sources):
    """``destinations[k][env, :] = sources[k][env, :]`` for every k."""
    for k in range(len(destinations)):
        destination = destinations[k]
        source = sources[k]
        for w in range(destination.shape[1]):
            destination[env, w] = source[env, w]


@device_function
def copy_env_rows_to_log(env, t, logs, sources):
    """``logs[k][t, env, :] = sources[k][env, :]`` for every k."""
    for k in range(len(logs)):
        log = logs[k]
        source = sources[k]
        for w in range(source.shape[1]):
            log[t, env, w] = source[env, w]


@env_kernel
def restore_saved_rows(env, reset_live_words, reset_saved_words, reset_live_bytes, reset_saved_bytes):
    """Copy env ``env``'s saved rows (``<name>_at_reset``) back into the live arrays.

    The one reset mechanism: `CUDADataManager.reset_done_envs` runs it behind the
    ``_done_`` mask, and env runtimes compose it into their own masked reset launches
    (its parameter names are those of `CUDADataManager.reset_rows`).
    """
    copy_env_rows(env, reset_live_words, reset_saved_words)
    copy_env_rows(env, reset_live_bytes, reset_saved_bytes)


@env_kernel
def clear_episode(env, _done_, _timestep_):
    """A reset env is no longer done and starts its episode at step 0."""
    _done_[env] = 0
    _timestep_[env] = 0


@env_kernel
def log_step(env, timestep, episode_length, live_words, log_words, live_bytes, log_bytes):
    """Copy an env's rows into row ``timestep[env]`` of each log (skipped outside 0..T)."""
    t = timestep[env]
    if t >= 0 and t <= episode_length:
        copy_env_rows_to_log(env, t, log_words, live_words)
        copy_env_rows_to_log(env, t, log_bytes, live_bytes)
