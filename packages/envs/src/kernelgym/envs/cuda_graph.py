"""Capture ``env.step(policy(obs))`` in one CUDA graph, then replay it.

A step of a `KernelVectorEnv` on ``cuda`` is a few kernel launches on torch's current
stream (`kernelgym.core.streams`) into buffers fixed at construction, with no host
synchronization under the ``"deferred"`` action check (the cuda default) and no
allocation. A policy forward on the observation buffer plus that step can therefore be
captured once with ``torch.cuda.graph`` and replayed for each step, saving the Python and
launch overhead of every kernel:

```python
import kernelgym.envs as kge
from kernelgym.envs.cuda_graph import capture_step

env = kge.make("CartPole-v1", 4096, backend="cuda", seed=0)
obs, _ = env.reset()
step = capture_step(env, policy, obs)    # warms up (real steps), then captures
for _ in range(1000):
    step.replay()                         # one policy forward + one env step
env.check_actions()                       # one host read: a bad action raises here
```

``capture_step(env, policy, obs, steps=16)`` captures 16 steps in one graph: a replay
then runs 16 policy forwards and 16 env steps for one call, and the host pays one
replay instead of 16 sets of launches (`kernelgym.collectors.DeviceCollector` captures
its whole fragment the same way).

It follows torch's recipe: ``warmup`` eager steps on a side stream (they compile and load
every kernel and let torch's allocator settle; they step the env), then the capture of
``steps`` steps. The capture runs nothing. Each replayed step reads the observation
buffer, runs the policy into its captured action tensor (memory of the graph's private
pool, allocated once at capture, reused by every replay), copies it into the env's action
buffer, and steps every env; the outputs land in the env's own buffers (``step.obs``, ``step.rewards``, ...,
the tensors ``env.step`` returns). A bad action is recorded on the device by the env's
deferred check and raised by ``env.check_actions()`` (or the next ``env.numpy()``,
``reset()``, ``close()``): read it once per rollout, not per replay. An env whose
action check is ``"sync"`` reads the host every step and cannot be captured.

The torch calls go through ``api`` (torch.cuda's ``Stream``, ``current_stream``,
``stream``, ``CUDAGraph`` and ``graph``, by default): a test passes stand-ins to check
the order of the steps without a GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from kernelgym.envs.observations import is_structured, leaf_arrays
from kernelgym.envs.runtime.actions import check_mode
from kernelgym.envs.runtime.vector_env import KernelVectorEnv

__all__ = ["CapturedStep", "TorchGraphs", "capture_step"]


class TorchGraphs:
    """How `capture_step` makes streams and captures graphs: torch.cuda's way.

    A stand-in for tests implements the same five methods.
    """

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


class CapturedStep:
    """``steps`` captured ``env.step(policy(obs))``: call `replay` once per ``steps`` steps.

    Attributes
    ----------
    graph : torch.cuda.CUDAGraph
    steps : int
        Env steps per replay.
    obs, actions, rewards, terminated, truncated : torch.Tensor
        The static tensors a replay reads and writes: the env's observation buffer, the
        policy's action tensor of the last captured step, and the env's output buffers
        (after a replay they hold the last step's outputs).
    info : dict
        The env's ``info`` tensors (static too).
    """

    __slots__ = ("graph", "steps", "obs", "actions", "rewards", "terminated", "truncated", "info", "_api")

    def __init__(self, graph, steps, obs, actions, outputs, api):
        self.graph, self.steps, self.obs, self.actions, self._api = graph, steps, obs, actions, api
        _, self.rewards, self.terminated, self.truncated, self.info = outputs

    def replay(self) -> None:
        """``steps`` policy forwards and env steps, on the current stream, no host synchronization."""
        self._api.replay(self.graph)


def capture_step(
    env, policy: Callable, obs: torch.Tensor, *, steps: int = 1, warmup: int = 3, api: Any = None
) -> CapturedStep:
    """Capture ``steps`` times ``env.step(policy(obs))`` in one CUDA graph, after ``warmup`` eager steps.

    Parameters
    ----------
    env : KernelVectorEnv
        On ``cuda``, reset, with ``check_action_values`` ``"deferred"`` (the cuda default)
        or False.
    policy : callable
        ``policy(obs) -> actions`` in torch ops (run under ``torch.no_grad()``), actions
        of the env's action shape and dtype on its device.
    obs : torch.Tensor, or a dict/tuple of them
        The env's observation buffer: the tensor ``env.reset()`` and ``env.step()`` return
        (for a Dict/Tuple observation space, the tree of leaf tensors they return).
    steps : int
        Env steps per replay (>= 1).
    warmup : int
        Eager steps on a side stream before the capture (>= 1); they step the env.
    api : TorchGraphs-like, optional
        Streams and graphs (default: torch.cuda's).

    Returns
    -------
    CapturedStep

    Raises
    ------
    ValueError
        An env off ``cuda`` (with the default ``api``), a ``"sync"`` action check, a
        ``steps`` or ``warmup`` below 1, or an ``obs`` that is not the env's observation buffer.
    """
    if not isinstance(env, KernelVectorEnv):
        raise TypeError(f"env: expected a KernelVectorEnv (kernelgym.envs.make), got {type(env).__name__} {env!r}")
    if not callable(policy):
        raise TypeError(f"policy: expected a callable obs -> actions, got {type(policy).__name__} {policy!r}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps: expected an int >= 1 (env steps per replay), got {steps!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 1:
        raise ValueError(f"warmup: expected an int >= 1 (eager steps before the capture), got {warmup!r}")
    if api is None:
        if env.backend != "cuda":
            raise ValueError(
                f"env: CUDA graphs capture cuda work, expected an env on backend 'cuda', got {env.backend!r}"
            )
        api = TorchGraphs()
    if env.backend != "cpu" and check_mode(env.check_action_values, env.backend) == "sync":
        raise ValueError(
            "env: check_action_values 'sync' reads the host at every step, which a CUDA graph cannot "
            "capture; expected 'deferred' (the cuda default) or False"
        )

    if not _is_observation_buffer(env, obs):
        raise ValueError(
            "obs: expected the env's observation buffer (the tensor env.reset() and env.step() "
            "return; for a Dict/Tuple space, its tree of leaf tensors), got another tensor; a replay "
            "would not see new observations"
        )

    def one_step():
        with torch.no_grad():
            actions = policy(obs)
        return actions, env.step(actions)

    def captured_steps():
        for _ in range(steps - 1):
            one_step()
        return one_step()  # every step writes the same output buffers: the last one's are returned

    side = api.side_stream()
    with api.on_stream(side):
        for _ in range(warmup):
            one_step()
    api.join(side)
    graph, (actions, outputs) = api.capture(captured_steps)
    return CapturedStep(graph, steps, obs, actions, outputs, api)


def _is_observation_buffer(env, obs) -> bool:
    """Whether ``obs`` is the env's observation buffer: the tensor, or each leaf's for a Dict/Tuple space."""
    tensor = env.data_manager.data_on_device_via_torch
    space = env.single_observation_space
    if not is_structured(space):
        return obs is tensor("observations")
    try:
        given = leaf_arrays(space, obs)
    except (KeyError, IndexError, TypeError):
        return False
    return all(value is tensor(name) for name, value in given.items())  # leaves are registered by kernel name
