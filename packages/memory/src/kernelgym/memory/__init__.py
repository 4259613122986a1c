"""kernelgym.memory: circular memories of shape (memory_size, num_envs, ...) on any torch device.

``Memory`` and ``RandomMemory`` keep the names and behaviour of skrl's memories (without
their defects); ``SequenceMemory`` samples episode-aware sequences with burn-in for
recurrent policies; ``PrioritizedMemory`` does proportional prioritized replay on a torch
sum tree. Every memory can expose its storage to Numba kernels without a copy.
"""

from importlib import metadata as _metadata

from .base import Memory
from .prioritized_memory import PrioritizedMemory
from .random_memory import RandomMemory
from .sequence_memory import SequenceMemory
from .spaces import sample_shape
from .sum_tree import SumTree

__version__ = _metadata.version("kernelgym-memory")  # set by the repository's VERSION file

__all__ = ["Memory", "PrioritizedMemory", "RandomMemory", "SequenceMemory", "SumTree", "sample_shape"]
