"""DeviceCollector: roll a kernelgym vector env and a torch actor out on the env's
device, writing fragments in place.

Nothing leaves the device and nothing is allocated per step by the collector: the
fragment and the running context are allocated once and every step ``copy_`` s
into slices of them (the actor's forward pass allocates its own outputs, as any
torch module does). On ``cuda`` no step synchronizes with the host: finished
episodes are handled with masks, never with ``if fin.any()``.

A bad action (out of the action space, or not finite) raises by the end of the fragment
in which the policy gave it: the env's ``"sync"`` check raises in that step, and its
``"deferred"`` check (the cuda and sim default: the env with the bad action does not step, with
no host synchronization) is read once per fragment, after the last step
(``env.check_actions()``: one host read of the env's fault record, none per step).

With ``capture=True`` on ``cuda`` the first fragment runs eagerly on a side stream (it
compiles and loads every kernel and settles torch's allocator) while its host reads are
counted; then the whole fragment (the ``n_steps + 1`` actor forwards, the ``n_steps`` env
steps and every copy into the fragment) is captured in one CUDA graph, and each later
`collect` replays it: one call for the host instead of hundreds of launches. The
fragments are the eager ones, bit for bit. What a graph cannot hold falls back to eager
fragments with one `CaptureFallbackWarning` that says why: another backend, an env whose
action check is ``"sync"`` (a host read per step), an actor or env that reads the host
during the warm-up fragment (``.item()``, ``bool(tensor)``, a copy to the host, ...), or
a capture that torch refuses.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

import numpy
import torch

from .graphs import TorchGraphs
from .rollout.actor import Actor
from .rollout.core import check_positive, copy_, react, take_actions
from .rollout.nested import getitem, leaves, suply
from .rollout.state import Fragment, State

__all__ = ["CaptureFallbackWarning", "DeviceCollector", "MEMORY_NAMES"]


class CaptureFallbackWarning(RuntimeWarning):
    """A `DeviceCollector` asked to capture its fragments collects them eagerly; the message says why."""


# which fragment field goes into which memory tensor in `DeviceCollector.add_to`
MEMORY_NAMES = {
    "states": "obs",
    "actions": "act",
    "rewards": "rew",
    "next_states": "final_obs",
    "terminated": "terminated",
    "truncated": "truncated",
}


def _autoreset_mode(env: Any) -> str:
    mode = getattr(env, "autoreset_mode", None)
    mode = getattr(mode, "value", mode)
    return str(mode).lower().replace("_", "")


def _zero_where(done: torch.Tensor):
    """Zero dim 1 of a recurrent state where ``done`` (B,) is set, without syncing."""

    def zero(h: torch.Tensor) -> torch.Tensor:
        mask = done.view((1, -1) + (1,) * (h.dim() - 2))
        return h.masked_fill(mask, 0)

    return zero


def _named_leaves(struct: Any, path: str) -> list[tuple[str, Any]]:
    """``(path, leaf)`` of a nested container, depth first, in :func:`leaves`' order."""
    if isinstance(struct, dict):
        return [item for key, value in struct.items() for item in _named_leaves(value, f"{path}[{key!r}]")]
    if isinstance(struct, (list, tuple)):
        return [item for index, value in enumerate(struct) for item in _named_leaves(value, f"{path}[{index}]")]
    return [(path, struct)]


def _batch_shapes(actor: Any, output: str, struct: Any, batch: tuple[int, ...], first_dim: int) -> list[tuple]:
    """The leaf shapes of the actor's first ``output``, each with ``batch`` at dims ``first_dim ..``.

    A leaf sized for one env would broadcast to every env on ``copy_``: refused here,
    naming the output, the expected and the received shape.
    """
    shapes = []
    for path, leaf in _named_leaves(struct, repr(output)):
        if not isinstance(leaf, torch.Tensor):
            raise TypeError(
                f"the output {path} of {type(actor).__name__}.step: expected a tensor, got {type(leaf).__name__}"
            )
        if tuple(leaf.shape[first_dim : first_dim + len(batch)]) != batch:
            expected = "(" + ", ".join(["..."] * first_dim + [str(n) for n in batch] + ["..."]) + ")"
            raise ValueError(
                f"the output {path} of {type(actor).__name__}.step: expected shape {expected} "
                f"(num_envs={batch[-1]} at dim {first_dim + len(batch) - 1}: one per env), got {tuple(leaf.shape)}"
            )
        shapes.append(tuple(leaf.shape))
    return shapes


def _check_shapes(actor: Any, output: str, struct: Any, shapes: list[tuple]) -> None:
    """Refuse a step's ``output`` whose leaves are not exactly ``shapes`` (the first step's)."""
    named = _named_leaves(struct, repr(output))
    if len(named) != len(shapes):
        raise ValueError(
            f"the output {output!r} of {type(actor).__name__}.step: expected {len(shapes)} tensors "
            f"(as in its first step), got {len(named)}"
        )
    for (path, leaf), shape in zip(named, shapes):
        got = tuple(leaf.shape) if isinstance(leaf, torch.Tensor) else type(leaf).__name__
        if got != shape:
            raise ValueError(
                f"the output {path} of {type(actor).__name__}.step: expected shape {shape} (as in its first "
                f"step: one per env), got {got}"
            )


class DeviceCollector:
    """Collect ``(n_steps + 1) x N`` fragments from a kernelgym ``KernelVectorEnv``.

    Parameters
    ----------
    env : KernelVectorEnv
        Single-agent or multi-agent, with ``autoreset_mode="same_step"`` (the final
        observation of an episode is in ``info["final_obs"]``).
    actor : Actor
        Runs on ``env.device``; gets ``1 x N x ...`` inputs.
    n_steps : int
        Transitions per fragment.
    seed : int or None
        Passed to ``env.reset`` once, at construction.
    capture : bool
        Capture the fragment in a CUDA graph after the first one and replay it (see the
        module's docstring); where it cannot, warn once and collect eagerly.
    graphs : TorchGraphs-like, optional
        Streams, host-read watch and graphs (default: torch.cuda's; a test passes a
        stand-in, which also lets the capture path run on the cpu backend).

    Attributes
    ----------
    captured : bool
        Whether `collect` replays a captured graph (after the first fragment).
    eager_reason : str or None
        Why fragments are collected eagerly although ``capture=True`` (None otherwise).

    Notes
    -----
    Iterating yields the same :class:`Fragment` object every time, refilled in
    place: ``state`` and ``actor`` are ``(n_steps + 1) x N x ...``, ``env`` holds
    ``final_obs`` (``n_steps x N x ...``, the observation before any reset) and
    ``hx`` the actor's recurrent state at the fragment's start. The records follow
    :mod:`kernelgym.collectors.rollout.core`.

    The actor's recurrent state must have ``num_envs`` at dim 1 (``L x N x ...``) and
    its info values ``1 x N x ...``; every later step must return exactly those shapes
    (``ValueError`` naming the output, expected and received shape otherwise), since
    a tensor sized for one env would be broadcast to all.
    """

    def __init__(
        self, env: Any, actor: Any, n_steps: int, *, seed: int | None = None, capture: bool = False, graphs: Any = None
    ):
        check_positive("n_steps", n_steps)
        if not isinstance(capture, bool):
            raise TypeError(f"capture: expected True or False, got {capture!r}")
        if graphs is not None and not capture:
            raise ValueError("graphs: streams and graphs for a capture, expected with capture=True, got capture=False")
        if n_steps >= 2**62:  # torch sizes are int64: beyond, its own error names no argument
            raise ValueError(f"n_steps: expected a positive int below 2**62, got {n_steps}")
        for attribute in ("num_envs", "device", "reset", "step", "single_action_space"):
            if not hasattr(env, attribute):
                raise TypeError(
                    f"env: expected a kernelgym KernelVectorEnv (with .{attribute}), got {type(env).__name__}"
                )
        if not callable(getattr(actor, "step", None)):
            raise TypeError(f"actor: expected an Actor with .step(...), got {type(actor).__name__}")
        mode = _autoreset_mode(env)
        if mode != "samestep":
            raise ValueError(
                "env: DeviceCollector needs autoreset_mode='same_step' (records hold the "
                f"reset observation and final_obs the true one); got {mode!r}"
            )
        self.env, self.actor, self.n_steps = env, actor, n_steps
        # the env's deferred action check, read once per fragment (envs without one: None)
        self._check_actions = getattr(env, "check_actions", None)
        self.device = torch.device(env.device)
        n_envs = int(env.num_envs)

        obs, _ = env.reset(seed=seed)
        # a Dict/Tuple observation is a dict/tuple of tensors, kept so in every record
        obs = suply(lambda x: torch.as_tensor(x, device=self.device), obs)
        space = env.single_action_space
        agents = (int(env.num_agents),) if getattr(env, "num_agents", 1) > 1 else ()
        act_shape = (n_envs, *agents, *(space.shape or ()))
        act_dtype = torch.from_numpy(numpy.zeros(0, dtype=space.dtype)).dtype
        reward_shape = (n_envs, *agents)

        def zeros(shape, dtype):
            return torch.zeros((1, *shape), dtype=dtype, device=self.device)

        # the running context: 1 x N x ... (the actor's T x B x ... convention)
        self.ctx = State(
            stepno=zeros((n_envs,), torch.int64),
            obs=suply(lambda x: x.clone().unsqueeze(0), obs),
            act=zeros(act_shape, act_dtype),
            rew=zeros(reward_shape, torch.float32),
            fin=torch.ones((1, n_envs), dtype=torch.bool, device=self.device),
            terminated=zeros((n_envs,), torch.bool),
            truncated=zeros((n_envs,), torch.bool),
        )
        with torch.no_grad():
            _, hx, info = react(actor, self.ctx, None, virtual=True)
        # exact batch shapes: copy_ would broadcast a state or info sized for one env to all
        self._hx_shapes = _batch_shapes(actor, "hx", hx, (n_envs,), 1)
        self._info_shapes = _batch_shapes(actor, "info", info, (1, n_envs), 0)
        self.hx = actor.reset(hx, slice(None)) if leaves(hx) else hx
        # Actor.reset zeroes the envs it is given: a mask does the same without the
        # host sync that indexing by a bool tensor would cost
        self._zero_hx_by_mask = type(actor).reset is Actor.reset

        def timeline(x: torch.Tensor, length: int) -> torch.Tensor:
            return torch.empty((length, *x.shape[1:]), dtype=x.dtype, device=self.device)

        try:
            self.fragment = Fragment(
                state=suply(lambda x: timeline(x, n_steps + 1), self.ctx),
                actor=suply(lambda x: timeline(x, n_steps + 1), info),
                env={"final_obs": suply(lambda x: timeline(x, n_steps), self.ctx.obs)},
                hx=suply(torch.clone, self.hx),
            )
        except (RuntimeError, MemoryError) as error:  # the allocator's message names no argument
            raise ValueError(
                f"n_steps: {n_steps} steps of {n_envs} envs are more than {self.device} can allocate "
                f"({str(error).splitlines()[0][:160]})"
            ) from error

        # capture: None (eager), "pending" (the next fragment warms up, then captures) or
        # "replay" (self._graph holds the fragment)
        self._graph: Any = None
        self._capture: str | None = None
        self.eager_reason: str | None = None
        if capture:
            self._graphs = TorchGraphs() if graphs is None else graphs
            reason = self._cannot_capture(graphs is None)
            if reason is None:
                self._capture = "pending"
            else:
                self._fall_back(reason, stacklevel=3)

    @property
    def captured(self) -> bool:
        """Whether `collect` replays a captured graph."""
        return self._capture == "replay"

    def _cannot_capture(self, default_graphs: bool) -> str | None:
        """Why the env cannot be captured, known before any fragment (None: it may be)."""
        backend = getattr(self.env, "backend", None)
        if default_graphs and backend != "cuda":
            return f"the env's backend is {backend!r}: CUDA graphs capture cuda work only"
        check = getattr(self.env, "check_action_values", None)
        if check == "sync" or (check is True and backend == "cpu"):
            return (
                "the env's check_action_values is 'sync', a host read at every step; "
                "'deferred' (the cuda default) or False can be captured"
            )
        return None

    def _fall_back(self, reason: str, stacklevel: int = 4) -> None:
        """Collect eagerly from now on; say why, once (``stacklevel``: the caller of the public method)."""
        self._capture, self._graph, self.eager_reason = None, None, reason
        warnings.warn(
            f"DeviceCollector: collecting eager fragments, not a captured CUDA graph: {reason}",
            CaptureFallbackWarning,
            stacklevel=stacklevel,
        )

    def __iter__(self) -> Iterator[Fragment]:
        while True:
            yield self.collect()

    def collect(self) -> Fragment:
        """Refill ``self.fragment`` with the next ``n_steps`` transitions; return it.

        Raises
        ------
        ValueError
            The policy gave a bad action in this fragment (naming the env index, the
            value and the action space), at the latest at the fragment's end.
        """
        if self._capture == "replay":
            self._graphs.replay(self._graph)
        elif self._capture == "pending":
            self._warm_up_and_capture()
        else:
            self._fill()
        self._read_action_check()
        return self.fragment

    def _warm_up_and_capture(self) -> None:
        """Collect this fragment eagerly on a side stream, counting its host reads; then
        capture the next one (a capture runs nothing on a GPU) for the later calls."""
        graphs = self._graphs
        side = graphs.side_stream()
        with graphs.on_stream(side), graphs.host_reads() as reads:
            self._fill()
        graphs.join(side)
        if reads.reads:
            self._fall_back(f"the actor or the env reads the host within a fragment: {reads.summary()}")
            return
        try:
            self._graph, _ = graphs.capture(self._fill)
        except RuntimeError as error:  # torch's own refusal of an op under capture
            self._fall_back(f"torch refused the capture ({str(error).splitlines()[0][:300]})")
            return
        self._capture = "replay"

    def _fill(self) -> None:
        """Step the actor and the env ``n_steps`` times, writing ``self.fragment`` in place."""
        env, actor, ctx, out = self.env, self.actor, self.ctx, self.fragment
        hx = self.hx
        copy_(out.hx, hx)
        fin = ctx.fin[0]
        for t in range(self.n_steps + 1):
            copy_(out.state, ctx, at=slice(t, t + 1))
            with torch.no_grad():
                act, hx_, info = react(actor, ctx, hx, virtual=t >= self.n_steps)
            _check_shapes(actor, "info", info, self._info_shapes)
            _check_shapes(actor, "hx", hx_, self._hx_shapes)
            copy_(out.actor, info, at=slice(t, t + 1))
            if t >= self.n_steps:
                break  # the look-ahead reaction to record T is never acted upon
            take_actions(ctx.act, act, actor)
            obs, rew, terminated, truncated, env_info = env.step(ctx.act[0])
            copy_(ctx.obs, obs, at=0)
            ctx.rew[0].copy_(rew)
            ctx.terminated[0].copy_(terminated)
            ctx.truncated[0].copy_(truncated)
            torch.logical_or(ctx.terminated[0], ctx.truncated[0], out=fin)
            ctx.stepno.add_(1).masked_fill_(ctx.fin, 0)
            finals = getitem(out.env["final_obs"], index=t)
            copy_(finals, obs)
            if "final_obs" in env_info:
                suply(self._keep_final, finals, env_info["final_obs"], fin=fin)
            if leaves(hx_):
                hx_ = suply(_zero_where(fin), hx_) if self._zero_hx_by_mask else actor.reset(hx_, fin)
            copy_(hx, hx_)

    def _read_action_check(self) -> None:
        """The fragment's one host read: raise a bad action the env's deferred check recorded."""
        if self._check_actions is not None:
            try:
                self._check_actions()  # the fragment's one host read: a deferred bad action raises here
            except ValueError as error:
                note = (
                    "DeviceCollector: the policy gave this action in the fragment just collected "
                    "(raised at the fragment's end); the env did not step on it"
                )
                if sys.version_info >= (3, 11):
                    error.add_note(note)
                else:  # no add_note before 3.11 (it raised AttributeError there): the note joins the message
                    error.args = (f"{error}\n{note}",)
                raise

    def _keep_final(self, final: torch.Tensor, kept, *, fin: torch.Tensor) -> None:
        """Where an episode ended, the env's final observation (one leaf) replaces the reset one."""
        mask = fin.view((-1,) + (1,) * (final.dim() - 1))
        torch.where(mask, torch.as_tensor(kept, device=self.device), final, out=final)

    def add_to(self, memory: Any, names: Mapping[str, str] = MEMORY_NAMES) -> None:
        """Append the last fragment's ``n_steps`` transitions to a kernelgym memory.

        Parameters
        ----------
        memory : kernelgym.memory.Memory (or any object with ``num_envs``,
            ``add_samples(**tensors)`` and ``get_tensor_names()``) whose ``num_envs`` is
            the env's; another ``num_envs`` raises ``ValueError`` and writes nothing.
        names : memory tensor name -> fragment field (``obs``, ``act``, ``rew``,
            ``terminated``, ``truncated``, ``final_obs``). Transition ``t`` is the
            observation ``obs[t]``, the action ``act[t + 1]`` taken on it and its
            outcome in record ``t + 1``; ``final_obs[t]`` is the next observation
            before any reset.
        """
        fields = {"obs", "act", "rew", "fin", "terminated", "truncated", "final_obs"}
        unknown = {field for field in names.values() if field not in fields}
        if unknown:
            raise KeyError(f"names: fragment fields must be among {sorted(fields)}, got {sorted(unknown)}")
        missing = set(names) - set(memory.get_tensor_names())
        if missing:
            raise KeyError(f"memory: has no tensor(s) {sorted(missing)}; it has {sorted(memory.get_tensor_names())}")
        state, n_envs = self.fragment.state, int(self.env.num_envs)
        memory_envs = getattr(memory, "num_envs", None)
        if memory_envs != n_envs:
            # a memory of other rows per sample would spread (or fold) each step's envs
            # over several of its rows: refuse, before anything is written
            raise ValueError(f"memory: expected num_envs={n_envs} (the env's), got num_envs={memory_envs!r}")

        def row(field: str, t: int) -> torch.Tensor:
            if field == "obs":
                data = getitem(state.obs, index=t)
            elif field == "final_obs":
                data = getitem(self.fragment.env["final_obs"], index=t)
            else:
                data = getattr(state, field)[t + 1]
            # a Dict/Tuple observation: its leaves side by side, in the space's order (as
            # Memory.create_tensor sizes a Dict space), in the memory tensor's dtype
            parts = [leaf.reshape(n_envs, -1) for leaf in leaves(data)]
            return parts[0] if len(parts) == 1 else torch.cat([part.to(dtypes[field]) for part in parts], dim=1)

        tensors = getattr(memory, "tensors", {})
        dtypes = {
            field: tensors[name].dtype if name in tensors else torch.get_default_dtype()
            for name, field in names.items()
        }
        for t in range(self.n_steps):
            memory.add_samples(**{name: row(field, t) for name, field in names.items()})
