"""kernelgym on Ray: ``VectorSampledTasks`` and ``DeviceCollector`` beyond one machine.

Install the extra: ``pip install "kernelgym-collectors[ray]"``.

- `RayVectorSampledTasks`: every name and semantic of ``VectorSampledTasks``,
  its samplers hosted in Ray actors (several per actor), each actor with its own
  resources (``num_cpus``, ``num_gpus``).
- `RayCollector`: ``num_collectors`` Ray actors, each owning a kernelgym
  ``KernelVectorEnv`` and a ``DeviceCollector``; fragments come back as torch tensors,
  weights go out through the object store once per update.
- `connect`: join the running Ray cluster (``address="auto"``), a given one, or
  start a local one.

A lost actor (its code raised, its process was killed, its node was lost) surfaces as
the package's ``WorkerError`` hierarchy; see `kernelgym.collectors.ray.faults`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from kernelgym.collectors.ray.cluster import connect
from kernelgym.collectors.ray.vector_tasks import RayVectorSampledTasks

if TYPE_CHECKING:
    from kernelgym.collectors.ray.collector import RayCollector


def __getattr__(name: str) -> Any:
    # RayCollector needs torch; the sampler actors, which import this package, do not
    if name != "RayCollector":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = importlib.import_module("kernelgym.collectors.ray.collector").RayCollector
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | {"RayCollector"})


__all__ = ["RayCollector", "RayVectorSampledTasks", "connect"]
