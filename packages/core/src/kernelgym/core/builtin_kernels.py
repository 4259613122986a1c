"""Kernels the data manager launches itself: per-env reset and per-step episode logs.

Both take tuples of raw views (see :func:`kernelgym.core.arrays.byte_view`): ``uint64``
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
def reset_done_envs(env, done, timestep, live_words, saved_words, live_bytes, saved_bytes):
    """For a done env: copy its saved rows back, then clear ``done`` and ``timestep``."""
    if done[env] != 0:
        copy_env_rows(env, live_words, saved_words)
        copy_env_rows(env, live_bytes, saved_bytes)
        done[env] = 0
        timestep[env] = 0


@env_kernel
def log_step(env, timestep, episode_length, live_words, log_words, live_bytes, log_bytes):
    """Copy an env's rows into row ``timestep[env]`` of each log (skipped outside 0..T)."""
    t = timestep[env]
    if t >= 0 and t <= episode_length:
        copy_env_rows_to_log(env, t, log_words, live_words)
        copy_env_rows_to_log(env, t, log_bytes, live_bytes)
