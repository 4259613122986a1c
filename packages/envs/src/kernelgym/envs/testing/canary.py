"""Out-of-bounds writes: launch an env's kernels on canary-padded buffers.

Every buffer a kernel can bind (actions, RNG streams, observations, rewards,
terminated flags and the state arrays) is allocated with `PAD_ROWS` extra
rows before and after, filled with the byte `CANARY`, and the kernels get views of
the middle rows. A kernel that writes past its env's rows lands in a pad: on the cpu
backend (compiled code does not check bounds) and on a GPU the pad bytes change; the
simulator checks bounds itself and raises IndexError, which is reported the same way.

On the cpu the kernels run in the env's own step program (`KernelVectorEnv`'s plan,
bound to padded copies of every array it binds): ``step_kernel`` with no env pending a
reset, ``reset_kernel`` with every env pending one. The parity check and the other
checks step envs of the same program, so it compiles once for all of them, not once
for this check and once for the rest. The runtime's own kernels in that program write
their env's rows only; a pad they touched would be reported under its buffer's name.
"""

from __future__ import annotations

import numpy as np

from kernelgym.core import bind_launches
from kernelgym.core.binding import NO_FAULT
from kernelgym.envs.runtime.autoreset import DONE
from kernelgym.envs.runtime.names import bind_env_programs
from kernelgym.envs.runtime.streams import stream_table
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
    if harness.backend == "cpu":
        return _launch_env_program(harness, kernel_field, state, actions, seed)
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


def _launch_env_program(harness, kernel_field: str, state: dict, actions: np.ndarray, seed: int) -> list[str]:
    """`launch_padded` on the cpu: the env's NEXT_STEP step program on padded copies of its values.

    Every env steps (``step_kernel``) or every env resets (``reset_kernel``), as the
    program's reset flag (`kernelgym.envs.runtime.autoreset.DONE`) says. The env the
    plan comes from is made but never reset or stepped: no kernel runs on its own memory.
    """
    if kernel_field not in ("step_kernel", "reset_kernel"):
        raise ValueError(f"kernel_field: expected 'step_kernel' or 'reset_kernel', got {kernel_field!r}")
    num_envs = actions.shape[0]
    plan = harness.unstarted_env(num_envs)._launch_plan(same_step=False)
    given = {name: state[name].astype(dtype) for name, dtype in harness.state_dtypes.items()}
    given["rng_states"] = stream_table(harness.seed_streams(seed, num_envs))
    given[DONE] = np.full(num_envs, kernel_field == "reset_kernel", plan.values[DONE].dtype)
    for name in plan.per_call:  # the actions, and the rows view the action check reads
        template = plan.values[name]
        given[name] = np.asarray(actions).astype(template.dtype).reshape(template.shape)
    buffers = [
        _Padded(name, given.get(name, value))
        for name, value in plan.values.items()
        # a read-only array (a constant table) stays as it is: its type is part of the program's
        if isinstance(value, np.ndarray) and value.ndim >= 1 and value.flags.writeable
    ]
    values = {**plan.values, **{buffer.name: buffer.view("cpu") for buffer in buffers}}
    launch = bind_launches(plan.step, values, per_call=plan.per_call, compile_at="first_launch", **plan.options)
    fault = launch(*(values[name] for name in plan.per_call))
    if fault != NO_FAULT:  # the kit draws valid actions: a refusal is the kit's own error
        raise RuntimeError(f"the env's action check refused the kit's actions {actions!r} (fault {fault})")
    return [f"{kernel_field} wrote outside its rows: {text}" for buffer in buffers for text in buffer.touched_pads()]
