"""Out-of-bounds writes: launch an env's kernels on canary-padded buffers.

Every buffer a kernel can bind (actions, RNG streams, observations, rewards,
terminated flags and the state arrays) is allocated with `PAD_ROWS` extra
rows before and after, filled with the byte `CANARY`, and the kernels get views of
the middle rows. A kernel that writes past its env's rows lands in a pad: on the cpu
backend (compiled code does not check bounds) and on a GPU the pad bytes change; the
simulator checks bounds itself and raises IndexError, which is reported the same way.
"""

from __future__ import annotations

import numpy as np

from kernelgym.envs.runtime.names import bind_env_programs
from kernelgym.envs.testing.nonfinite import user_frame

__all__ = ["CANARY", "PAD_ROWS", "launch_padded"]

CANARY = 0xA5
PAD_ROWS = 2


class _Padded:
    """A host buffer with canary rows around ``rows`` rows of ``values``."""

    def __init__(self, name: str, values: np.ndarray):
        self.name = name
        rows = values.shape[0]
        self.host = np.empty((rows + 2 * PAD_ROWS, *values.shape[1:]), dtype=values.dtype)
        self.host.view(np.uint8)[...] = CANARY
        self.host[PAD_ROWS : PAD_ROWS + rows] = values
        self.rows = rows

    def view(self, backend: str):
        if backend == "cpu":
            self.device = self.host
        else:
            from numba import cuda

            self.device = cuda.to_device(self.host)
        return self.device[PAD_ROWS : PAD_ROWS + self.rows]

    def touched_pads(self) -> list[str]:
        host = self.host if isinstance(self.device, np.ndarray) else self.device.copy_to_host()
        found = []
        pads = (("before env 0", host[:PAD_ROWS]), (f"after env {self.rows - 1}", host[PAD_ROWS + self.rows :]))
        for label, pad in pads:
            written = np.flatnonzero(pad.reshape(-1).view(np.uint8) != CANARY)
            if written.size:
                found.append(f"{self.name!r} {label} (byte offsets {written[:8].tolist()} of the pad)")
        return found


def launch_padded(harness, kernel_field: str, state: dict, actions: np.ndarray, seed: int) -> list[str]:
    """Run the spec's ``step_kernel`` or ``reset_kernel`` for every env on padded buffers.

    The kernels are bound by name as the runtime binds them (`kernelgym.core.binding`).

    Parameters
    ----------
    harness : EnvHarness
    kernel_field : {"step_kernel", "reset_kernel"}
    state : dict of (num_envs, ...) arrays
    actions : numpy.ndarray
    seed : int
        Seeds the RNG streams.

    Returns
    -------
    list of str
        One line per buffer whose pads were written, or the simulator's bounds error.
    """
    spec, backend = harness.spec, harness.backend
    num_envs = actions.shape[0]
    buffers = [
        _Padded("actions", actions),
        _Padded("rng_states", harness.seed_streams(seed, num_envs)),
        *(_Padded(name, array) for name, array in harness.obs_buffers(num_envs).items()),
        _Padded("rewards", np.zeros((num_envs, *harness.agent_shape), dtype=np.float32)),
        _Padded("terminated", np.zeros(num_envs, dtype=np.bool_)),
    ]
    buffers += [_Padded(name, state[name].astype(dtype)) for name, dtype in harness.state_dtypes.items()]
    views = {buffer.name: buffer.view(backend) for buffer in buffers}
    launch = bind_env_programs(
        spec,
        [[kernel] for kernel in spec.load_kernels(kernel_field)],
        views,
        backend,
        harness.params,
        harness.precision,
    )
    try:
        launch()
    except IndexError as error:  # the simulator's own bounds check, raised in numba's devicearray.py
        where = user_frame(error)
        return [f"{kernel_field} indexed out of bounds: {error}" + (f", at {where}" if where else "")]
    return [f"{kernel_field} wrote outside its rows: {text}" for buffer in buffers for text in buffer.touched_pads()]
