r"""The rollout core: buffers (``prepare``), running state (``startup``, ``context``)
and the loops that fill them (``collect``, ``evaluate``, ``episode``).

Timing convention (the seed's): ``fragment.state[t]`` is $(t, x_t, a_{t-1}, r_t, d_t)$,
the actor answers it with $a_t$, which is written into ``state[t + 1].act`` together
with the reward and flags of the step it caused. When ``state.fin[t + 1]`` is set,
``state.obs[t + 1]`` is already the reset observation of the next episode and the
true final observation is ``fragment.env["final_obs"][t]``. ``terminated`` and
``truncated`` tell the two endings apart, so a learner can compute

    G[t] = rew[t+1] + gamma * (1 - terminated[t+1]) * (G[t+1] if not fin[t+1] else v(final_obs[t]))

and bootstrap from the final observation on truncation.
"""

from __future__ import annotations

import numbers
from collections.abc import Generator
from typing import Any, cast

import numpy
import torch

from .batch import as_batch
from .nested import getitem, leaves, setitem, suply
from .shared import Aliased, aliased, torchify
from .state import Context, Fragment, State

__all__ = [
    "prepare",
    "startup",
    "context",
    "collect",
    "evaluate",
    "episode",
    "react",
    "copy_",
    "as_device",
    "check_positive",
    "check_timeout",
    "take_actions",
]


def copy_(dst: Any, src: Any, *, at: Any = None) -> None:
    """Copy the tensors of ``src`` into ``dst`` (identical structure), optionally
    into ``dst[at]``."""
    if at is not None:
        dst = getitem(dst, index=at)
    suply(torch.Tensor.copy_, dst, src)


def react(actor: Any, state: State, hx: Any, *, virtual: bool):
    """Call the actor protocol ``step(stepno, obs, act, rew, fin, *, hx, virtual)``."""
    return actor.step(state.stepno, state.obs, state.act, state.rew, state.fin, hx=hx, virtual=virtual)


def take_actions(buffer: Any, actions: Any, actor: Any, path: str = "action") -> None:
    """Copy the actor's ``actions`` into the action ``buffer`` (same nesting), refusing
    what ``Tensor.copy_`` would silently change.

    ``copy_`` casts floats to ints (a float action for a discrete space becomes all
    zeros) and broadcasts (a ``(1, 1)`` action is given to every env): both raise here,
    naming the actor's output, the expected and the received shape and dtype. An action
    of the buffer's size in another layout that broadcasts to it (``(B,)`` for
    ``(1, B)``) and a safe cast (``int32`` to ``int64``) are taken.

    Raises
    ------
    TypeError, ValueError
        The output is not a tensor of a dtype that casts safely, or not of the shape.
    """
    where = f"the output {path!r} of {type(actor).__name__}.step"
    if isinstance(buffer, torch.Tensor):
        if not isinstance(actions, torch.Tensor):
            raise TypeError(f"{where}: expected a tensor of shape {tuple(buffer.shape)}, got {type(actions).__name__}")
        try:
            fits = torch.broadcast_shapes(actions.shape, buffer.shape) == buffer.shape
        except RuntimeError:
            fits = False
        if not fits or actions.numel() != buffer.numel():
            raise ValueError(
                f"{where}: expected shape {tuple(buffer.shape)} (one action per env), got {tuple(actions.shape)}"
            )
        if not torch.can_cast(actions.dtype, buffer.dtype):
            raise TypeError(
                f"{where}: expected dtype {buffer.dtype} (the action space's) or one that casts to it "
                f"without loss, got {actions.dtype}"
            )
        buffer.copy_(actions)
        return
    if isinstance(buffer, dict):
        if not isinstance(actions, dict) or set(actions) != set(buffer):
            raise TypeError(f"{where}: expected a dict with keys {sorted(buffer)}, got {actions!r:.200}")
        for key in buffer:
            take_actions(buffer[key], actions[key], actor, f"{path}[{key!r}]")
        return
    if not isinstance(actions, (tuple, list)) or len(actions) != len(buffer):
        raise TypeError(f"{where}: expected a sequence of {len(buffer)} parts, got {actions!r:.200}")
    for index, (part, given) in enumerate(zip(buffer, actions)):
        take_actions(part, given, actor, f"{path}[{index}]")


def as_device(device: Any) -> torch.device:
    """``None`` means the CPU."""
    return torch.device("cpu") if device is None else torch.device(device)


def check_positive(name: str, value: Any) -> None:
    """Raise ValueError naming ``name`` unless ``value`` is a positive int."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name}: expected a positive int, got {value!r}")


def check_timeout(timeout: Any) -> None:
    """Raise ValueError unless ``timeout`` is a positive number of seconds."""
    # typeshed's numbers.Real lacks the reflected comparisons a Real has: compare it as a float
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) or not cast(float, timeout) > 0:
        raise ValueError(f"timeout: expected a positive number of seconds, got {timeout!r}")


def prepare(env, actor, n_steps: int, n_envs: int, *, pinned=False, shared=False, device=None) -> Fragment:
    """Allocate the tensors of one ``(1 + n_steps) x n_envs`` trajectory fragment.

    Parameters
    ----------
    env : gymnasium env, list of envs or vector env
        Gives the structure and dtypes of observations and actions. It is reset and
        stepped once with a random action.
    actor : Actor
        ``actor.step(..., hx=None, virtual=True)`` is called once for the shapes of
        its recurrent state and info.
    n_steps, n_envs : int
        The fragment length (dim 0 holds ``1 + n_steps`` records) and batch size.
    pinned, shared : bool
        Allocate in pinned (host-to-GPU) or inter-process shared memory.
    device : torch.device or None
        Where the actor runs for the example call.

    Returns
    -------
    Fragment of CPU tensors.
    """
    check_positive("n_steps", n_steps)
    check_positive("n_envs", n_envs)
    obs, act, rew = as_batch(env).example()
    example = State(
        numpy.int64(0), obs, act, numpy.float32(rew), numpy.bool_(False), numpy.bool_(False), numpy.bool_(False)
    )
    state = torchify(example, 1 + n_steps, n_envs, shared=shared, pinned=pinned)
    env_info = torchify({"final_obs": obs}, n_steps, n_envs, shared=shared, pinned=pinned)
    with torch.no_grad():
        _, hx, info = react(actor, suply(lambda x: x[:1].to(device), state), None, virtual=True)
    hx = torchify(suply(torch.Tensor.cpu, hx), shared=shared, pinned=pinned)
    info = torchify(suply(lambda x: x[0].cpu(), info), 1 + n_steps, shared=shared, pinned=pinned)
    return Fragment(state=state, actor=info, env=env_info, hx=hx)


def startup(envs, actor, buffer: Fragment, *, pinned=False) -> tuple[Aliased, Aliased]:
    """Reset the envs and the actor's recurrent state; alias ``buffer``.

    Returns
    -------
    ctx : Aliased Context
        The running context: ``ctx.npy`` arrays are ``B x ...``, ``ctx.pyt`` tensors
        ``1 x B x ...``, both views of one storage (pinned if asked).
    fragment : Aliased Fragment
        Zero-copy numpy/torch views of ``buffer``.

    The first record is flagged ``fin`` (a fresh episode: there was no previous
    action, so ``act`` and ``rew`` are zero) with ``terminated`` and ``truncated``
    unset: no transition ended there.
    """
    batch = as_batch(envs)
    fragment = aliased(buffer)
    npy, pyt = getitem((fragment.npy.state, fragment.pyt.state), index=0)
    npy.fin[:], npy.terminated[:], npy.truncated[:] = True, False, False
    npy.rew[:], npy.stepno[:] = 0.0, 0
    suply(lambda act: act.fill(0), npy.act)  # a_{-1} does not exist: zero, not garbage
    batch.reset(npy.obs)
    hx = actor.reset(fragment.pyt.hx, slice(None))
    ctx = aliased(Context(pyt, hx, pyt.obs), copy=True, pinned=pinned)
    # the actor takes T x B x ... inputs: a unit time dim on the torch side only
    suply(torch.Tensor.unsqueeze_, ctx.pyt.state, dim=0)
    return ctx, fragment


def context(*envs, pinned=False) -> tuple[Aliased, Aliased]:
    """Allocate and reset an actor-less running context (``State`` only).

    Returns ``(state, env)``: the aliased ``B``-env state (torch side ``1 x B x ...``)
    and the aliased ``1 x B`` env record holding ``final_obs``.
    """
    batch = as_batch(envs[0] if len(envs) == 1 else list(envs))
    obs, act, rew = batch.example()
    example = State(numpy.int64(0), obs, act, numpy.float32(rew), True, False, False)
    state = aliased(torchify(example, batch.n_envs, copy=True, pinned=pinned))
    env = aliased(torchify({"final_obs": obs}, 1, batch.n_envs, copy=True, pinned=pinned))
    suply(torch.Tensor.unsqueeze_, state.pyt, dim=0)
    state.npy.fin[:], state.npy.terminated[:], state.npy.truncated[:] = True, False, False
    state.npy.rew[:], state.npy.stepno[:] = 0.0, 0
    suply(lambda act: act.fill(0), state.npy.act)
    batch.reset(state.npy.obs)
    return state, env


def collect(envs, actor, fragment: Aliased, ctx: Aliased, *, sticky=False, device=None) -> bool:
    r"""Fill ``fragment`` in place by stepping ``actor`` and ``envs`` in lockstep.

    Parameters
    ----------
    envs : list of envs, vector env or a batch from `as_batch`
    actor : Actor
    fragment : Aliased Fragment (from `startup`)
        Receives ``state[0..T]``, ``actor[0..T]``, ``env[0..T-1]`` and ``hx`` (the
        recurrent state at ``t = 0``).
    ctx : Aliased Context (from `startup`), advanced in place.
    sticky : bool
        Stop stepping an env whose episode ended until the next fragment: its later
        records repeat the reset observation with zero reward and ``fin`` set.
    device : torch.device or None
        Where the actor runs; the context is mirrored there.

    Notes
    -----
    The record ``T`` only gets the actor's look-ahead (``virtual=True``) reaction
    (e.g. the bootstrap value); the next fragment starts from it again.
    """
    batch = as_batch(envs)
    if sticky and not batch.supports_sticky:
        raise ValueError("sticky=True needs a list of envs: a vector env cannot pause single envs")
    device = as_device(device)
    out, final_obs = fragment.npy.state, fragment.npy.env["final_obs"]
    npy, pyt, hx = ctx.npy.state, ctx.pyt.state, ctx.pyt.hx
    copy_(fragment.pyt.hx, hx)
    pyt_ = pyt
    if device.type != "cpu":
        pyt_, hx = suply(torch.Tensor.to, (pyt, hx), device=device)

    n_steps = len(out.fin) - 1
    for t in range(1 + n_steps):
        setitem(out, npy, index=t)
        with torch.no_grad():
            act, hx_, info = react(actor, pyt_, hx, virtual=t >= n_steps)
        copy_(fragment.pyt.actor, info, at=slice(t, t + 1))
        if t >= n_steps:
            break  # the look-ahead reaction of record T is never acted upon
        take_actions(pyt.act, act, actor)
        just_done = batch.step(npy.act, npy, ctx.npy.original_obs, sticky=sticky and t > 0)
        setitem(final_obs, ctx.npy.original_obs, index=t)
        if leaves(hx_) and just_done.any():
            hx_ = actor.reset(hx_, torch.from_numpy(numpy.flatnonzero(just_done)))
        copy_(hx, hx_)
        if pyt_ is not pyt:
            copy_(pyt_, pyt)

    if sticky and leaves(hx):
        # a stuck env's hx advanced on repeated inputs: restart it for the next fragment
        stuck = numpy.flatnonzero(npy.fin)
        if len(stuck):
            copy_(hx, actor.reset(hx, torch.from_numpy(stuck)))
    # `hx`, not the look-ahead `hx_`, is h_T: the next fragment recomputes record T
    copy_(ctx.pyt.hx, hx)
    return True


def evaluate(envs, actor, *, n_steps: int | None = None, device=None) -> numpy.ndarray:
    """Play one episode in every env (at most ``n_steps`` steps) and return the
    undiscounted returns, a float64 array of shape ``(n_envs,)``.

    Envs whose episode ended keep being stepped when they are vectorised, but their
    rewards no longer count.
    """
    if n_steps is not None:
        check_positive("n_steps", n_steps)
    batch = as_batch(envs)
    device = as_device(device)
    state, env = context(batch)
    npy, pyt = state.npy, state.pyt
    pyt_ = suply(torch.Tensor.to, pyt, device=device) if device.type != "cpu" else pyt
    running = numpy.ones(batch.n_envs, dtype=bool)
    returns = numpy.zeros(batch.n_envs, dtype=numpy.float64)
    hx, t = None, 0
    while running.any() and (n_steps is None or t < n_steps):
        with torch.no_grad():
            act, hx, _ = react(actor, pyt_, hx, virtual=False)
        take_actions(pyt.act, act, actor)
        batch.step(npy.act, npy, env.npy["final_obs"][0])
        returns += numpy.where(running, npy.rew, 0.0)
        running &= ~npy.fin
        if pyt_ is not pyt:
            copy_(pyt_, pyt)
        t += 1
    return returns


def episode(envs, actor, *, device=None) -> Generator[tuple, None, None]:
    """Step the envs forever, yielding every transition (episodic data generator).

    Yields
    ------
    state : State, ``1 x B x ...``, what the actor reacted to ($t$).
    hx : the actor's recurrent state $h_t$.
    actor : the actor's info $A_t$.
    next : State, ``1 x B x ...``, the next record with the TRUE observation (before
        any reset).
    env : ``{"final_obs": ...}``, ``1 x B x ...``.

    The yielded tensors are overwritten by the next step: clone what you keep.
    """
    batch = as_batch(envs)
    device = as_device(device)
    state, env = context(batch)
    npy, pyt = state.npy, state.pyt
    nxt = aliased(pyt, copy=True)
    on_device = device.type != "cpu"
    with torch.no_grad():
        _, hx, _ = react(actor, suply(torch.Tensor.to, pyt, device=device), None, virtual=True)
    hx = actor.reset(hx, slice(None))
    current = suply(torch.Tensor.to, pyt, device=device, copy=True)
    while True:
        with torch.no_grad():
            act, hx_, info = react(actor, current, hx, virtual=False)
        take_actions(pyt.act, act, actor)
        stepno = npy.stepno + 1  # the step count before an auto-reset zeroes it
        just_done = batch.step(npy.act, npy, env.npy["final_obs"][0])
        copy_(nxt.pyt, pyt)
        setitem(nxt.npy.obs, env.npy["final_obs"][0], index=slice(None))
        nxt.npy.stepno[:] = stepno
        if on_device:
            yield (
                current,
                hx,
                info,
                suply(torch.Tensor.to, nxt.pyt, device=device),
                suply(torch.Tensor.to, env.pyt, device=device),
            )
        else:
            yield current, hx, info, nxt.pyt, env.pyt
        if leaves(hx_) and just_done.any():
            hx_ = actor.reset(hx_, torch.from_numpy(numpy.flatnonzero(just_done)))
        copy_(current, pyt)
        hx = hx_
