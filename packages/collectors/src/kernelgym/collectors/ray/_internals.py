"""The private parts of kernelgym-collectors that ``RayVectorSampledTasks`` reuses, imported here only.

It keeps ``VectorSampledTasks``'s semantics by running the same ``SamplerGroup`` in each
actor, the same public API base class on the driver and the same wire format (pickled
commands, packed step results, portable failures) between them. When those modules
move, this is the one file to follow them. None of them imports torch: an actor starts
in a fraction of the time torch's import takes.
"""

from kernelgym.collectors._sampler_group import (  # moves to kernelgym.collectors.sampler_group
    SamplerFailure,
    SamplerFailures,
    SamplerGroup,
)
from kernelgym.collectors._worker import (
    FAILED,
    OK,
    PackedArray,
    pack_results,
    packable,
    portable_failures,
    unpack_results,
)
from kernelgym.collectors._worker import _send as send_reply
from kernelgym.collectors.vector_tasks import CLOSE_TIMEOUT, encode
from kernelgym.collectors.vector_tasks import _VectorTasksBase as VectorTasksBase

__all__ = [
    "CLOSE_TIMEOUT",
    "FAILED",
    "OK",
    "PackedArray",
    "SamplerFailure",
    "SamplerFailures",
    "SamplerGroup",
    "VectorTasksBase",
    "encode",
    "pack_results",
    "packable",
    "portable_failures",
    "send_reply",
    "unpack_results",
]
