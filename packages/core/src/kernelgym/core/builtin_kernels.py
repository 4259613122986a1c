"""Kernels the data manager launches itself: per-env reset and per-step episode logs.

Both take tuples of ``uint8`` views (see :func:`kernelgym.core.arrays.byte_view`), so one
launch handles any number of arrays of any dtype and any number of dims.
"""

from kernelgym.core.kernels import env_kernel


@env_kernel
def reset_done_envs(env, done, timestep, live_rows, saved_rows):
    """For a done env: copy its saved rows back, then clear ``done`` and ``timestep``."""
    if done[env] != 0:
        for k in range(len(live_rows)):
            live = live_rows[k]
            saved = saved_rows[k]
            for b in range(live.shape[1]):
                live[env, b] = saved[env, b]
        done[env] = 0
        timestep[env] = 0


@env_kernel
def log_step(env, timestep, episode_length, live_rows, log_rows):
    """Copy an env's rows into row ``timestep[env]`` of each log (skipped outside 0..T)."""
    t = timestep[env]
    if t >= 0 and t <= episode_length:
        for k in range(len(live_rows)):
            live = live_rows[k]
            log = log_rows[k]
            for b in range(live.shape[1]):
                log[t, env, b] = live[env, b]
