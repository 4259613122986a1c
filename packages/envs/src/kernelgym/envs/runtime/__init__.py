"""The vector runtime, one concern per module.

- `names`: what env kernels bind by name (runtime buffers, state arrays, params);
- `buffers`: the buffers, allocated once on the backend;
- `actions`: action checks before any kernel runs;
- `autoreset`: the composed reset / step / bookkeeping launches;
- `streams`: the RNG streams (one per env, or per (env, agent) for agent-layout envs);
- `params`: per-env params (the table, ``set_params``, ``randomize=``);
- `state_io`: ``get_state``/``set_state`` and the RNG streams;
- `vector_env`: `KernelVectorEnv`, which puts them together.
"""

from kernelgym.envs.runtime.names import RUNTIME_NAMES
from kernelgym.envs.runtime.vector_env import KernelVectorEnv, StepViews

__all__ = ["KernelVectorEnv", "StepViews", "RUNTIME_NAMES"]
