"""`KernelVectorEnv` (its home is `kernelgym.envs.runtime`; this path is kept for imports)."""

from kernelgym.envs.runtime.vector_env import KernelVectorEnv, StepViews

__all__ = ["KernelVectorEnv", "StepViews"]
