"""The private parts of kernelgym-collectors that ``RayVectorSampledTasks`` reuses, imported here only.

It keeps ``VectorSampledTasks``'s semantics by running the same ``SamplerGroup`` in each
actor, the same public API base class on the driver and the same wire format (pickled
commands, packed step results, portable failures) between them. When those modules
move, this is the one file to follow them. None of them imports torch: an actor starts
in a fraction of the time torch's import takes.
"""

from kernelgym.collectors.vector_tasks import _VectorTasksBase as VectorTasksBase
from kernelgym.collectors.wire import FAILED, OK, PackedArray, encode, encode_reply, packable, rebuild_failures
from kernelgym.collectors.worker_loop import serve, start_group
from kernelgym.collectors.worker_pool import CLOSE_TIMEOUT

__all__ = [
    "CLOSE_TIMEOUT",
    "FAILED",
    "OK",
    "PackedArray",
    "VectorTasksBase",
    "encode",
    "encode_reply",
    "packable",
    "rebuild_failures",
    "serve",
    "start_group",
]
