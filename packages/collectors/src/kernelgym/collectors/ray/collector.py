"""``RayCollector``: ``DeviceCollector`` s in Ray actors, one kernelgym vector env each.

Each actor makes its ``KernelVectorEnv`` (``kernelgym.envs.make``) on its own backend
(``cuda`` on the GPU Ray gave it, or ``cpu``), a copy of the policy and a
``DeviceCollector``, and returns each fragment as CPU tensors. The learner puts the
policy's weights into Ray's object store once per update; every collect call carries
that one ``ObjectRef``, and an actor loads the weights only when the ref is new to it.

A bad action raises in the actor's ``DeviceCollector`` by the end of its fragment (a
deferred action check is read once per fragment) and reaches the learner as a
``WorkerError`` naming the actor, with the env's ``ValueError`` (env index, value,
action space) as its cause.
"""

from __future__ import annotations

import copy
import os
import warnings
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

import cloudpickle
import ray
import torch

from kernelgym.collectors.device_collector import DeviceCollector
from kernelgym.collectors.processes import is_seconds
from kernelgym.collectors.ray import faults
from kernelgym.collectors.ray.cluster import actor_names, check_fits, check_max_restarts, check_resources, connect
from kernelgym.collectors.rollout import Fragment, suply
from kernelgym.collectors.worker_errors import WorkerError, WorkerRestartWarning


class CollectorActor:
    """The body of one Ray actor: a kernelgym vector env, a policy and a ``DeviceCollector``."""

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        backend: str,
        seed: int | None,
        env_kwargs: Mapping[str, Any],
        policy_payload: bytes,
        n_steps: int,
        threads: int,
    ):
        # as many kernel threads as CPUs Ray gave this actor (numba would start one per core
        # of the node, and actors sharing a node would spin against each other)
        os.environ.setdefault("NUMBA_NUM_THREADS", str(threads))
        torch.set_num_threads(threads)
        import kernelgym.envs  # in the actor only: the driver needs no env package

        if seed is not None:
            torch.manual_seed(seed)  # a stochastic policy samples the same actions in every seeded run
        self.env = kernelgym.envs.make(
            env_id, num_envs, backend=backend, seed=seed, **{"autoreset_mode": "same_step", **env_kwargs}
        )
        self.policy = cloudpickle.loads(policy_payload).to(self.env.device)
        self.collector = DeviceCollector(self.env, self.policy, n_steps, seed=seed)
        self.weights_id: str | None = None

    def describe(self) -> dict[str, Any]:
        """Where this actor runs: its pid, the env's device and the GPUs Ray gave it."""
        return {"pid": os.getpid(), "device": str(self.env.device), "gpu_ids": ray.get_gpu_ids()}

    def collect(self, weights: list) -> Fragment:
        """The next fragment, on the CPU, collected with the weights in ``weights[0]``
        (an ``ObjectRef``, wrapped in a list so that Ray hands over the ref, not the value)."""
        (ref,) = weights
        if ref is not None and ref.hex() != self.weights_id:
            self.policy.load_state_dict(ray.get(ref))
            self.weights_id = ref.hex()
        return suply(lambda leaf: leaf.cpu() if isinstance(leaf, torch.Tensor) else leaf, self.collector.collect())

    def loaded_weights(self) -> str | None:
        """The id of the weights object this actor collects with (None: its initial ones)."""
        return self.weights_id


class _Envs(NamedTuple):
    num_envs: int


class _Received(NamedTuple):
    """What ``DeviceCollector.add_to`` reads of its collector (its fragment, env width and
    steps), so that the learner writes a received fragment exactly as an in-process one."""

    fragment: Fragment
    env: _Envs
    n_steps: int


def concatenate(fragments: list[Fragment]) -> Fragment:
    """One fragment of all envs: every leaf joined along dim 1 (envs, also for ``hx``)."""
    return suply(lambda *leaves: torch.cat(leaves, dim=1), *fragments)


class RayCollector(faults.ActorHosts):
    """Collect ``(n_steps + 1) x N`` fragments from kernelgym envs in ``num_collectors`` Ray actors.

    Parameters
    ----------
    env_id : str
        A registered kernelgym env, made in each actor with
        ``kernelgym.envs.make(env_id, num_envs, backend=backend, seed=..., autoreset_mode="same_step")``.
    actor : Actor
        The policy (a torch module, as ``DeviceCollector`` takes it): cloudpickled to every
        collector. Train it on the learner and call ``update_policy_weights_()``.
    n_steps : int
        Transitions per fragment.
    num_envs : int
        Envs per collector actor.
    num_collectors : int
        Ray actors, each with its own env and ``DeviceCollector``.
    backend : {"cpu", "cuda", "auto"}
        The actors' env backend; ask for ``num_gpus=1`` to give each actor a GPU of its own.
    seed : int or None
        Collector ``k`` seeds its env and torch with ``seed + k``: seeded runs reproduce.
    env_kwargs : mapping, optional
        More ``kernelgym.envs.make`` arguments (``max_episode_steps``, params overrides).
    sync : bool
        True: each iteration collects one fragment from every actor with the newest
        weights and yields them joined along the env dim (``num_collectors * num_envs``
        envs). False: every actor always has a collection under way; fragments are yielded
        one actor at a time, as they arrive (possibly one weight update behind);
        ``last_collector`` says whose.
    memory : kernelgym.memory.Memory, optional
        Each fragment's transitions are appended to it on the learner
        (``DeviceCollector.add_to``); its ``num_envs`` must match the fragments' env count.
    device : str or torch.device
        Where the learner receives fragments.
    num_cpus, num_gpus : float
        Resources of each actor.
    timeout : float or None
        Seconds to wait for a fragment before declaring its actor hung. An actor's start-up
        (and restart) is allowed at least ``faults.START_TIMEOUT`` (300 s), as in
        ``RayVectorSampledTasks``.
    restart_on_failure : bool
        Let Ray restart a lost actor (``max_restarts`` times; -1: no limit) and go on
        collecting with a ``WorkerRestartWarning``; the fragment under way is lost, the
        restarted actor starts from its seed again. Without it a lost actor stops all.
    address, ray_init_kwargs
        The Ray cluster, as in ``RayVectorSampledTasks``.
    """

    def __init__(
        self,
        env_id: str,
        actor: torch.nn.Module,
        n_steps: int,
        *,
        num_envs: int,
        num_collectors: int = 2,
        backend: str = "cpu",
        seed: int | None = None,
        env_kwargs: Mapping[str, Any] | None = None,
        sync: bool = True,
        memory: Any = None,
        device: str | torch.device = "cpu",
        num_cpus: float = 1,
        num_gpus: float = 0,
        timeout: float | None = 60.0,
        restart_on_failure: bool = False,
        max_restarts: int = -1,
        address: str | None = None,
        ray_init_kwargs: Mapping[str, Any] | None = None,
    ):
        self._hosts: list[faults.Host] = []
        self._under_way: dict[Any, faults.Host] = {}  # async mode: one collect ref per actor
        self._is_closed = False
        for name, value in (("n_steps", n_steps), ("num_envs", num_envs), ("num_collectors", num_collectors)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name}: expected a positive int, got {value!r}")
        if not isinstance(env_id, str):
            raise TypeError(f"env_id: expected a registered kernelgym env id (str), got {type(env_id).__name__}")
        if not isinstance(actor, torch.nn.Module) or not callable(getattr(actor, "step", None)):
            raise TypeError(f"actor: expected an Actor (a torch module with .step), got {type(actor).__name__}")
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
            raise TypeError(f"seed: expected an int or None, got {seed!r}")
        if timeout is not None and not is_seconds(timeout):
            raise ValueError(
                f"timeout: expected a positive number of seconds up to threading.TIMEOUT_MAX or None (no limit), "
                f"got {timeout!r}"
            )
        check_max_restarts(max_restarts)
        check_resources(num_cpus, num_gpus)
        width = num_envs * num_collectors if sync else num_envs
        if memory is not None and getattr(memory, "num_envs", None) != width:
            raise ValueError(
                f"memory: its num_envs must be the fragments' env count, {width} "
                f"({'num_collectors x num_envs' if sync else 'num_envs, one actor per fragment'}), "
                f"got {getattr(memory, 'num_envs', None)!r}"
            )
        self.actor, self.n_steps, self.num_envs, self.sync = actor, n_steps, num_envs, bool(sync)
        self.memory, self.device = memory, torch.device(device)
        self.timeout, self.restart_on_failure = timeout, bool(restart_on_failure)
        self.last_collector: int | None = None
        self._weights_ref: Any = None
        try:
            # a CPU copy: an actor without the learner's GPU must be able to load it
            policy_payload = cloudpickle.dumps(copy.deepcopy(actor).cpu())
        except Exception as exc:
            raise TypeError(f"actor: must be picklable by cloudpickle to reach the collectors: {exc}") from exc

        connect(address, ray_init_kwargs)
        self._ray_session = faults.session()
        check_fits("collector actors", num_collectors, num_cpus, num_gpus)
        actor_class = ray.remote(CollectorActor)
        options = dict(
            num_cpus=num_cpus,
            num_gpus=num_gpus,
            max_restarts=max_restarts if self.restart_on_failure else 0,
            max_task_retries=0,
        )
        try:
            for index, name in enumerate(actor_names("collector", num_collectors)):
                handle = actor_class.options(name=name, **options).remote(
                    env_id,
                    num_envs,
                    backend,
                    None if seed is None else seed + index,
                    dict(env_kwargs or {}),
                    policy_payload,
                    n_steps,
                    max(1, int(num_cpus)),
                )
                self._hosts.append(faults.Host(index, handle, name))
            # start-up has its own allowance (placement, process start, imports, env make), as in
            # RayVectorSampledTasks: a short collect timeout must not report healthy actors hung
            deadline = faults.deadline_after(faults.start_timeout(timeout))
            self.placements = [self._describe(host, deadline) for host in self._hosts]
        except BaseException:
            self.close()
            raise

    # -- actors -------------------------------------------------------------------------------

    def _describe(self, host: faults.Host, deadline: float | None) -> dict[str, Any]:
        """Wait for the actor to be up (at start or after a restart: the start-up allowance)."""
        placement = faults.call_once_up(host.actor.describe, host, deadline, faults.start_timeout(self.timeout))
        host.pid = placement["pid"]
        return placement

    def _submit(self, host: faults.Host) -> Any:
        return host.actor.collect.remote([self._weights_ref])

    def _fetch(self, ref: Any, host: faults.Host, deadline: float | None) -> Fragment | None:
        """The fragment of ``ref``; a lost actor is restarted (then: None) or stops all."""
        try:
            return faults.get(ref, host, deadline, self.timeout)
        except WorkerError as error:
            lost = isinstance(error, (faults.WorkerCrashedError, faults.WorkerTimeoutError))
            if not (lost and self.restart_on_failure):
                if lost:
                    self.close()
                raise
            self._restart(host, error)
            return None

    def _restart(self, host: faults.Host, error: WorkerError) -> None:
        if isinstance(error, faults.WorkerTimeoutError):
            faults.kill(host, restart=True)  # Ray restarts a dead actor, not a hung one
        try:
            deadline = faults.deadline_after(faults.start_timeout(self.timeout))
            self.placements[host.index] = self._describe(host, deadline)
        except WorkerError as failure:
            self.close()
            raise WorkerError(f"restarting {host.describe()} failed", **host.fields()) from failure
        error.restarted = True
        warnings.warn(WorkerRestartWarning(str(error)), stacklevel=4)

    def _receive(self, fragment: Fragment) -> Fragment:
        fragment = suply(lambda leaf: leaf.to(self.device) if isinstance(leaf, torch.Tensor) else leaf, fragment)
        if self.memory is not None:
            width = int(fragment.state.fin.shape[1])
            # _Received stands in for the collector: it has the three fields add_to reads
            DeviceCollector.add_to(_Received(fragment, _Envs(width), self.n_steps), self.memory)  # type: ignore[arg-type]
        return fragment

    def _check_open(self) -> None:
        if self._is_closed:
            raise RuntimeError("this RayCollector is closed")
        faults.check_session(self, self._ray_session)

    # -- public API ---------------------------------------------------------------------------

    @property
    def num_collectors(self) -> int:
        return len(self._hosts)

    @property
    def weights_ref(self) -> Any:
        """The ``ObjectRef`` of the newest weights (None before the first update)."""
        return self._weights_ref

    def update_policy_weights_(self, weights: torch.nn.Module | Mapping[str, torch.Tensor] | None = None) -> None:
        """Put the policy's weights into the object store once; every later collect uses them.

        Parameters
        ----------
        weights : module, state dict or None
            None: the ``actor`` given at construction (the learner trains it in place).
        """
        self._check_open()
        source = self.actor if weights is None else weights
        state = source.state_dict() if isinstance(source, torch.nn.Module) else source
        if not isinstance(state, Mapping):
            raise TypeError(f"weights: expected a torch module, a state dict or None, got {type(weights).__name__}")
        self._weights_ref = ray.put({name: tensor.detach().cpu() for name, tensor in state.items()})

    def loaded_weights(self) -> list[str | None]:
        """Per actor, the id (``ObjectRef.hex()``) of the weights it last collected with."""
        self._check_open()
        deadline = faults.deadline_after(self.timeout)
        return [faults.get(host.actor.loaded_weights.remote(), host, deadline, self.timeout) for host in self._hosts]

    def collect(self) -> Fragment:
        """One fragment from every actor, with the newest weights, joined along the env dim.

        An actor lost under ``restart_on_failure`` is restarted and asked again.
        """
        self._check_open()
        if not self.sync:
            raise RuntimeError("collect() is the sync mode's; iterate over an async RayCollector")
        deadline = faults.deadline_after(self.timeout)
        refs = [self._submit(host) for host in self._hosts]
        fragments = []
        for host, ref in zip(self._hosts, refs):
            fragment = self._fetch(ref, host, deadline)
            while fragment is None:  # restarted: collect its fragment again
                fragment = self._fetch(self._submit(host), host, faults.deadline_after(self.timeout))
            fragments.append(fragment)
        self.last_collector = None
        return self._receive(concatenate(fragments) if len(fragments) > 1 else fragments[0])

    def _next_async(self) -> Fragment:
        self._check_open()
        if not self._under_way:
            self._under_way = {self._submit(host): host for host in self._hosts}
        while True:
            ready, _ = ray.wait(list(self._under_way), num_returns=1, timeout=self.timeout)
            # nothing arrived in time: the oldest submission's actor is hung (reported at once)
            ref = ready[0] if ready else next(iter(self._under_way))
            host = self._under_way.pop(ref)
            fragment = self._fetch(ref, host, faults.deadline_after(self.timeout if ready else 0.0))
            self._under_way[self._submit(host)] = host  # with the newest weights
            if fragment is not None:
                self.last_collector = host.index
                return self._receive(fragment)

    def __iter__(self) -> Iterator[Fragment]:
        while True:
            yield self.collect() if self.sync else self._next_async()

    def close(self) -> None:
        """Stop every collector actor; once this returns Ray reports them all dead."""
        if self._is_closed:
            return
        self._is_closed = True
        self._under_way.clear()
        if not faults.in_session(getattr(self, "_ray_session", None)):
            return  # never connected, or Ray was shut down: the actors ended with their session
        for host in self._hosts:
            faults.kill(host)
        faults.wait_dead(self._hosts, 5.0)

    @property
    def is_closed(self) -> bool:
        return self._is_closed

    def __enter__(self) -> RayCollector:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_is_closed", True) is False and ray.is_initialized():
            self.close()
