"""kernelgym.memory: circular memories of shape (memory_size, num_envs, ...) on any torch device.

``Memory`` and ``RandomMemory`` keep the names and behaviour of skrl's memories (without
their defects); ``SequenceMemory`` samples episode-aware sequences with burn-in for
recurrent policies; ``PrioritizedMemory`` does proportional prioritized replay on a torch
sum tree. Every memory can expose its storage to Numba kernels without a copy.
"""

from .base import Memory
from .prioritized_memory import PrioritizedMemory
from .random_memory import RandomMemory
from .sequence_memory import SequenceMemory
from .spaces import sample_shape
from .sum_tree import SumTree

__version__ = "0.1.0"

__all__ = ["Memory", "PrioritizedMemory", "RandomMemory", "SequenceMemory", "SumTree", "sample_shape"]
