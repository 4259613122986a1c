"""The private parts of kernelgym-collectors that the Ray forms reuse, imported here only.

``RayVectorSampledTasks`` keeps ``VectorSampledTasks``'s semantics by running the same
``SamplerGroup`` in each actor, the same public API base class on the driver and the
same wire format (pickled commands, packed step results, portable failures) between
them; ``RayCollector``'s actors run a ``DeviceCollector``. When those modules move, this
is the one file to follow them.
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
from kernelgym.collectors.device_collector import DeviceCollector
from kernelgym.collectors.rollout.nested import suply
from kernelgym.collectors.rollout.state import Fragment
from kernelgym.collectors.vector_tasks import CLOSE_TIMEOUT, encode
from kernelgym.collectors.vector_tasks import _VectorTasksBase as VectorTasksBase

__all__ = [
    "CLOSE_TIMEOUT",
    "FAILED",
    "OK",
    "DeviceCollector",
    "Fragment",
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
    "suply",
    "unpack_results",
]
