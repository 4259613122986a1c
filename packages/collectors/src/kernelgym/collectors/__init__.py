"""kernelgym.collectors: vectorized tasks, rollout engines and a device collector.

``VectorSampledTasks`` and its helpers import without torch. The rollout engines
(`kernelgym.collectors.rollout`), ``DeviceCollector`` and the rollout's main names
(``State``, ``Fragment``, ``Context``, ``Actor``, ``torchify``, ``numpify``) need torch:
they are imported on first access, so ``import kernelgym.collectors`` stays cheap, also
in every worker process of ``VectorSampledTasks``.
"""

from __future__ import annotations

import importlib
from importlib import metadata as _metadata
from typing import TYPE_CHECKING, Any

from kernelgym.collectors.gym_sampler import GymTask, GymTaskSampler
from kernelgym.collectors.tasks import RLStepResult, Task, TaskProtocol, TaskSampler, TaskSamplerProtocol
from kernelgym.collectors.vector_tasks import (
    SingleProcessVectorSampledTasks,
    VectorSampledTasks,
    default_max_processes,
    tile_images,
)
from kernelgym.collectors.worker_errors import (
    WorkerCrashedError,
    WorkerError,
    WorkerRestartWarning,
    WorkerTimeoutError,
)

if TYPE_CHECKING:
    from kernelgym.collectors import rollout
    from kernelgym.collectors.device_collector import DeviceCollector
    from kernelgym.collectors.rollout import Actor, Context, Fragment, State, numpify, torchify

__version__ = _metadata.version("kernelgym-collectors")  # set by the repository's VERSION file

# name -> the module that defines it, imported on first access (PEP 562)
_LAZY = {
    "rollout": "kernelgym.collectors.rollout",
    "DeviceCollector": "kernelgym.collectors.device_collector",
    "Actor": "kernelgym.collectors.rollout.actor",
    "Context": "kernelgym.collectors.rollout.state",
    "Fragment": "kernelgym.collectors.rollout.state",
    "State": "kernelgym.collectors.rollout.state",
    "numpify": "kernelgym.collectors.rollout.shared",
    "torchify": "kernelgym.collectors.rollout.shared",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(_LAZY[name])
    value = module if name == "rollout" else getattr(module, name)
    globals()[name] = value  # later accesses skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "Actor",
    "Context",
    "DeviceCollector",
    "Fragment",
    "GymTask",
    "GymTaskSampler",
    "RLStepResult",
    "SingleProcessVectorSampledTasks",
    "State",
    "Task",
    "TaskProtocol",
    "TaskSampler",
    "TaskSamplerProtocol",
    "VectorSampledTasks",
    "WorkerCrashedError",
    "WorkerError",
    "WorkerRestartWarning",
    "WorkerTimeoutError",
    "default_max_processes",
    "numpify",
    "rollout",
    "tile_images",
    "torchify",
]
