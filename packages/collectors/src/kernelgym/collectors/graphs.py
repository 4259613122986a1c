"""How `DeviceCollector` makes streams, watches host reads and captures CUDA graphs.

The protocol of `kernelgym.envs.cuda_graph.TorchGraphs` (kernelgym-collectors does not
depend on kernelgym-envs, so it keeps its own), plus ``host_reads``. A test passes a
stand-in with the same six methods to check the order of the calls without a GPU.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch

from .host_reads import HostReads

__all__ = ["TorchGraphs"]


class TorchGraphs:
    """torch.cuda's streams and graphs, and torch's sync debug mode."""

    def side_stream(self):
        """A new stream that waits for the work queued so far on the current one."""
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        return side

    def on_stream(self, stream):
        """A context in which ``stream`` is torch's current stream."""
        return torch.cuda.stream(stream)

    def join(self, stream) -> None:
        """Make the current stream wait for the work queued on ``stream``."""
        torch.cuda.current_stream().wait_stream(stream)

    def capture(self, body: Callable[[], Any]):
        """``(graph, outputs)``: ``body`` captured in a new ``torch.cuda.CUDAGraph``."""
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outputs = body()
        return graph, outputs

    def replay(self, graph) -> None:
        """Run the captured work once (asynchronous)."""
        graph.replay()

    @contextlib.contextmanager
    def host_reads(self) -> Iterator[HostReads]:
        """A `HostReads` that also records what torch's sync debug mode reports.

        The sync debug mode sees synchronizations the op-level count cannot (a blocking
        copy issued inside an op, a stream synchronize); the count sees reads that on the
        CPU twin would not synchronize.
        """
        with warnings.catch_warnings(record=True) as caught, HostReads() as reads:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                yield reads
            finally:
                torch.cuda.set_sync_debug_mode("default")
        for caught_warning in caught:
            text = str(caught_warning.message)
            if "synchroniz" in text.lower():
                if "prototype feature" not in text:  # torch's note that the debug mode is new
                    reads.reads.append(f"torch sync debug mode: {text.splitlines()[0]}")
            else:  # not ours to swallow: the caller's warnings go on as they were raised
                warnings.warn_explicit(
                    caught_warning.message, caught_warning.category, caught_warning.filename, caught_warning.lineno
                )
