"""kernelgym.collectors: vectorized tasks, rollout engines and a device collector."""

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

__version__ = "0.1.0"

__all__ = [
    "GymTask",
    "GymTaskSampler",
    "RLStepResult",
    "SingleProcessVectorSampledTasks",
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
    "tile_images",
]
