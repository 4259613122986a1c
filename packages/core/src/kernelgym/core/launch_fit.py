"""Does a configured launch fit the GPU, and how many warps stay resident? No GPU needed.

A launch that asks for more than a streaming multiprocessor (SM) has fails on the GPU with
"too many resources requested for launch", something neither the cpu backend nor the
simulator can show. kernelgym configures every launch itself (see
`kernelgym.core.kernels` and `kernelgym.core.binding`): env kernels run
``min(ENV_THREADS_PER_BLOCK, num_envs)`` threads per block; agent kernels one thread per
agent, whole envs packed into blocks of at most ``MAX_AGENT_THREADS`` threads (`agent_block`
chooses how many), or one env per block striding over its agents when it has more. No block is larger than
the cap, so a kernel whose ptxas registers fit at the cap fits at any count.

`launch_fit` applies NVIDIA's CUDA Occupancy Calculator arithmetic to ptxas's report:

- registers are allocated per warp, ``ceil(registers_per_thread * 32, 256)`` each (the
  per-thread count rounded up to a multiple of 8);
- an SM holds ``floor(65,536 / registers_per_warp)`` warps by registers, rounded down to a
  multiple of the warp allocation granularity (4: one per SM sub-partition);
- resident blocks per SM are the least of that (in whole blocks), the warps and blocks caps,
  and the shared memory (each block also reserves 1 KiB for the system);
- a launch fits when at least one block is resident and the block, grid, per-thread
  registers and static shared memory are within the per-launch limits.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

__all__ = ["GPU_LIMITS", "GpuLimits", "LaunchFit", "agent_block", "configured_threads_per_block", "launch_fit"]


@dataclasses.dataclass(frozen=True)
class GpuLimits:
    """Per-SM and per-launch limits of one compute capability (see `GPU_LIMITS`)."""

    compute_capability: str
    shared_per_sm: int
    max_dynamic_shared_per_block: int
    max_threads_per_block: int = 1024
    max_registers_per_thread: int = 255
    max_registers_per_block: int = 65536
    registers_per_sm: int = 65536
    register_allocation_unit: int = 256
    warp_allocation_granularity: int = 4
    warp_size: int = 32
    max_warps_per_sm: int = 64
    max_blocks_per_sm: int = 32
    max_static_shared_per_block: int = 48 * 1024
    shared_allocation_unit: int = 128
    reserved_shared_per_block: int = 1024
    max_grid: tuple = (2**31 - 1, 65535, 65535)


# Sources: CUDA C++ Programming Guide, "Compute Capabilities" > "Technical Specifications per
# Compute Capability" (threads, warps, blocks, registers and shared memory per SM and per
# block; 48 KiB static shared memory per block, more only by dynamic opt-in; grid x up to
# 2^31-1, y and z up to 65,535) and NVIDIA's CUDA Occupancy Calculator (register allocation
# unit 256 per warp, warp allocation granularity 4, shared memory unit 128 B, 1 KiB shared
# memory reserved per block by the CUDA runtime). sm_80: A100 (164 KiB shared per SM, 163 KiB
# per block opt-in); sm_90: H100 (228 KiB per SM, 227 KiB opt-in).
GPU_LIMITS: dict[str, GpuLimits] = {
    "sm_80": GpuLimits("8.0", shared_per_sm=164 * 1024, max_dynamic_shared_per_block=163 * 1024),
    "sm_90": GpuLimits("9.0", shared_per_sm=228 * 1024, max_dynamic_shared_per_block=227 * 1024),
}


@dataclasses.dataclass(frozen=True)
class LaunchFit:
    """One launch configuration of one kernel on one GPU.

    Attributes
    ----------
    target : str
        ``sm_80``, ``sm_90a``...
    threads_per_block, registers_per_thread, shared_bytes : int
        The launch and ptxas's report.
    registers_per_block : int
        With the per-warp allocation unit.
    active_blocks, active_warps : int
        Resident per SM (0: the launch does not fit).
    max_warps : int
        The SM's warp slots.
    limited_by : str
        What bounds ``active_blocks``: ``"warps"``, ``"blocks"``, ``"registers"`` or ``"shared memory"``.
    problems : tuple of str
        Why the launch does not fit (empty when it does).
    """

    target: str
    threads_per_block: int
    registers_per_thread: int
    shared_bytes: int
    registers_per_block: int
    active_blocks: int
    active_warps: int
    max_warps: int
    limited_by: str
    problems: tuple = ()

    @property
    def fits(self) -> bool:
        return not self.problems

    @property
    def occupancy(self) -> float:
        """Resident warps over the SM's warp slots."""
        return self.active_warps / self.max_warps


def limits_for(target: str) -> GpuLimits:
    """The limits of a target name (``sm_90a`` has sm_90's)."""
    base = target.rstrip("af")
    if base not in GPU_LIMITS:
        raise ValueError(f"target: expected one of {sorted(GPU_LIMITS)} (or with an 'a' suffix), received {target!r}")
    return GPU_LIMITS[base]


def configured_threads_per_block(kind: str) -> int:
    """The largest block kernelgym launches a kernel of ``kind`` (``"env"`` or ``"agent"``) with."""
    from kernelgym.core import kernels

    if kind == "env":
        return kernels.ENV_THREADS_PER_BLOCK
    if kind == "agent":
        return kernels.MAX_AGENT_THREADS
    raise ValueError(f"kind: expected 'env' or 'agent', received {kind!r}")


@functools.cache
def agent_block(num_agents: int, cap: int) -> tuple[int, int]:
    """(envs per block, threads per env) of an agent kernel's launch with blocks of at most ``cap``.

    Each env gets ``min(num_agents, cap)`` consecutive threads, and a block holds whole envs.
    How many is chosen without the kernel's register count (unknown before it is compiled
    for the device): among the packings that keep at least as many of an SM's thread slots
    busy as one env per block does at EVERY register budget a kernel that fits ``cap``
    threads can have (8 to 64 resident warps), the one closest to the best packing at its
    worst budget. Big blocks lose to register granularity (11 agents: 23 envs in 8 warps
    keep 253 lanes busy where 12 warps of registers allow 3 blocks of 4 warps, 363), so
    11 agents get 11 envs (121 threads, 4 warps), within 5% of the best at every budget;
    one env per block left 83% of the lanes idle.
    """
    limits = GPU_LIMITS["sm_90"]
    _check_count("num_agents", num_agents, 1)
    _check_count("cap", cap, 1, limits.max_threads_per_block)
    per_env = min(num_agents, cap)
    fewest = _round_up(math.ceil(cap / limits.warp_size), limits.warp_allocation_granularity)
    budgets = range(fewest, limits.max_warps_per_sm + 1, limits.warp_allocation_granularity)

    def busy(envs: int, warps_by_registers: int) -> int:
        warps = math.ceil(envs * per_env / limits.warp_size)
        blocks = min(warps_by_registers // warps, limits.max_warps_per_sm // warps, limits.max_blocks_per_sm)
        return blocks * envs * per_env

    choices = range(1, cap // per_env + 1)
    best = {budget: max(busy(envs, budget) for envs in choices) for budget in budgets}
    never_worse = [envs for envs in choices if all(busy(envs, b) >= busy(1, b) for b in budgets)]
    envs_per_block = max(never_worse, key=lambda envs: (min(busy(envs, b) / best[b] for b in budgets), -envs))
    return envs_per_block, per_env


def _check_count(name: str, value, least: int, most: int | None = None) -> None:
    """Refuse a count that is not an int in ``[least, most]`` (2.5 threads, NaN registers)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name}: expected an int, got {type(value).__name__} {value!r}")
    if value < least or (most is not None and value > most):
        bounds = f">= {least}" if most is None else f"in [{least}, {most}]"
        raise ValueError(f"{name}: expected an int {bounds}, got {value}")


def launch_fit(
    target: str, registers_per_thread: int, threads_per_block: int, shared_bytes: int = 0, grid: tuple = (1, 1, 1)
) -> LaunchFit:
    """Whether a launch fits ``target`` and its occupancy (see the module docstring).

    Parameters
    ----------
    target : str
        ``sm_80``, ``sm_90`` or ``sm_90a``.
    registers_per_thread : int
        ptxas's "Used N registers".
    threads_per_block : int
        The block size (one-dimensional, as kernelgym launches).
    shared_bytes : int
        Static shared memory per block (ptxas's "bytes smem").
    grid : tuple of int
        Blocks in x, y and z.
    """
    limits = limits_for(target)
    _check_count("threads_per_block", threads_per_block, 1)
    _check_count("registers_per_thread", registers_per_thread, 0)
    _check_count("shared_bytes", shared_bytes, 0)
    if not isinstance(grid, tuple) or len(grid) != 3:
        raise TypeError(f"grid: expected a tuple of 3 block counts, got {grid!r}")
    for axis, blocks in zip("xyz", grid):
        _check_count(f"grid {axis}", blocks, 1)
    problems = []
    if threads_per_block > limits.max_threads_per_block:
        problems.append(f"{threads_per_block} threads per block > {limits.max_threads_per_block}")
    if registers_per_thread > limits.max_registers_per_thread:
        problems.append(f"{registers_per_thread} registers per thread > {limits.max_registers_per_thread}")
    if shared_bytes > limits.max_static_shared_per_block:
        problems.append(f"{shared_bytes} B static shared memory per block > {limits.max_static_shared_per_block}")
    for axis, blocks, most in zip("xyz", grid, limits.max_grid):
        if blocks > most:
            problems.append(f"grid {axis} of {blocks} blocks > {most}")

    warps = math.ceil(threads_per_block / limits.warp_size)
    registers_per_warp = _round_up(registers_per_thread * limits.warp_size, limits.register_allocation_unit)
    registers_per_block = registers_per_warp * warps
    by_limit = {"warps": limits.max_warps_per_sm // warps, "blocks": limits.max_blocks_per_sm}
    if registers_per_warp:
        warps_by_registers = _round_down(
            limits.registers_per_sm // registers_per_warp, limits.warp_allocation_granularity
        )
        by_limit["registers"] = warps_by_registers // warps
    shared = _round_up(shared_bytes, limits.shared_allocation_unit) + limits.reserved_shared_per_block
    by_limit["shared memory"] = limits.shared_per_sm // shared
    limited_by = min(by_limit, key=by_limit.__getitem__)
    active_blocks = by_limit[limited_by]
    if active_blocks == 0 and not problems:
        problems.append(
            f"no block fits an SM (by {limited_by}): {registers_per_block} registers per block "
            f"({registers_per_thread} per thread, allocated {registers_per_warp} per warp) for "
            f"{threads_per_block} threads; at most {limits.max_registers_per_block}"
        )
    if problems:
        active_blocks = 0
    return LaunchFit(
        target,
        threads_per_block,
        registers_per_thread,
        shared_bytes,
        registers_per_block,
        active_blocks,
        active_blocks * warps,
        limits.max_warps_per_sm,
        limited_by,
        tuple(problems),
    )


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def _round_down(value: int, unit: int) -> int:
    return value // unit * unit
