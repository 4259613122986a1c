"""Batches of envs the rollout engines step: a list of gymnasium envs, or one vector env.

A list of ``gymnasium.Env`` is stepped env by env in Python (the seed's semantics,
including ``sticky``); a vector env (gymnasium ``VectorEnv`` or kernelgym's
``KernelVectorEnv``) steps the whole batch in one call, which is what makes millions
of env-steps per second possible. Both write the same records: after a transition
that ends an episode, the observation is already the reset one and the true final
observation is kept separately (gymnasium's ``SAME_STEP`` autoreset).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy

from .nested import getitem, setitem, suply

__all__ = ["EnvList", "VectorEnvBatch", "as_batch", "make_batch", "is_vector_env"]


def is_vector_env(env: Any) -> bool:
    """True for a batched env (it has ``num_envs`` and ``single_action_space``)."""
    return hasattr(env, "num_envs") and hasattr(env, "single_action_space")


def _first(x: Any) -> numpy.ndarray:
    """The first env's item of a batched leaf (numpy array or CPU tensor)."""
    return numpy.asarray(x)[0]


def _autoreset_mode(env: Any) -> str:
    mode = getattr(env, "autoreset_mode", None)
    if mode is None:
        mode = getattr(env, "metadata", {}).get("autoreset_mode", "next_step")
    mode = getattr(mode, "value", mode)  # gymnasium's AutoresetMode enum
    return str(mode).lower().replace("_", "")


class EnvList:
    """A list of gymnasium envs stepped one at a time (auto-reset on the same step)."""

    def __init__(self, envs: Sequence[Any]):
        envs = list(envs)
        if not envs:
            raise ValueError("envs: expected at least one gymnasium env, got an empty list")
        self.envs = envs
        self.n_envs = len(envs)
        self.supports_sticky = True

    def example(self):
        """Reset the first env, take one random action; single-env ``obs, act, rew``."""
        env = self.envs[0]
        env.reset()
        act = env.action_space.sample()
        obs, rew, *_ = env.step(act)
        return obs, act, rew

    def reset(self, obs_out: Any) -> None:
        """Reset every env and write the initial observations into ``obs_out[j]``."""
        for j, env in enumerate(self.envs):
            obs, _ = env.reset()
            setitem(obs_out, obs, index=j)

    def step(self, act: Any, state: Any, final_obs: Any, *, sticky: bool = False) -> numpy.ndarray:
        """Step every env with ``act[j]`` and write the next records into ``state``.

        ``final_obs[j]`` gets the observation the step emitted; ``state.obs[j]`` the
        reset observation when the episode ended. With ``sticky``, envs whose ``fin``
        is set are not stepped (their reward is zeroed). Returns the bool mask of envs
        whose episode ended in this step.
        """
        just_done = numpy.zeros(self.n_envs, dtype=bool)
        for j, env in enumerate(self.envs):
            if sticky and state.fin[j]:
                state.rew[j] = 0.0
                setitem(final_obs, getitem(state.obs, index=j), index=j)
                continue
            obs, rew, terminated, truncated, _ = env.step(getitem(act, index=j))
            setitem(final_obs, obs, index=j)
            fin = bool(terminated) or bool(truncated)
            if fin:
                obs, _ = env.reset()
                state.stepno[j] = 0
            else:
                state.stepno[j] += 1
            setitem(state.obs, obs, index=j)
            state.rew[j] = rew
            state.fin[j], state.terminated[j], state.truncated[j] = fin, terminated, truncated
            just_done[j] = fin
        return just_done

    def close(self) -> None:
        for env in self.envs:
            env.close()


class VectorEnvBatch:
    """One vector env with ``SAME_STEP`` autoreset stepped as a whole batch."""

    def __init__(self, env: Any):
        mode = _autoreset_mode(env)
        if mode != "samestep":
            raise ValueError(
                "env: a vector env must auto-reset on the same step (gymnasium "
                "AutoresetMode.SAME_STEP, kernelgym autoreset_mode='same_step') so that "
                f"records match the list-of-envs semantics; got autoreset mode {mode!r}"
            )
        self.env = env
        self.n_envs = int(env.num_envs)
        self.supports_sticky = False

    def example(self):
        """Reset, step once with random actions; the first env's ``obs, act, rew``."""
        self.env.reset()
        act = self.env.action_space.sample()
        obs, rew, *_ = self.env.step(act)
        return suply(_first, obs), suply(_first, act), _first(rew)

    def reset(self, obs_out: Any) -> None:
        obs, _ = self.env.reset()
        suply(numpy.copyto, obs_out, suply(numpy.asarray, obs))

    def step(self, act: Any, state: Any, final_obs: Any, *, sticky: bool = False) -> numpy.ndarray:
        """Step the whole batch; same contract as `EnvList.step` (no ``sticky``)."""
        if sticky:
            raise ValueError("sticky=True needs a list of envs: a vector env cannot pause single envs")
        obs, rew, terminated, truncated, info = self.env.step(act)
        obs = suply(numpy.asarray, obs)
        suply(numpy.copyto, state.obs, obs)
        suply(numpy.copyto, final_obs, obs)
        numpy.copyto(state.rew, numpy.asarray(rew), casting="same_kind")
        numpy.copyto(state.terminated, numpy.asarray(terminated))
        numpy.copyto(state.truncated, numpy.asarray(truncated))
        numpy.logical_or(state.terminated, state.truncated, out=state.fin)
        numpy.add(state.stepno, 1, out=state.stepno)
        state.stepno[state.fin] = 0
        done = numpy.flatnonzero(state.fin)
        if len(done):
            # the observation that ended the episode, before the reset replaced it
            final = info["final_obs"]
            if isinstance(final, numpy.ndarray) and final.dtype == object:  # gymnasium's per-env list
                for j in done:
                    setitem(final_obs, suply(numpy.asarray, final[j]), index=j)
            else:  # one batched array (kernelgym): a single indexed copy per leaf
                suply(lambda dst, src: dst.__setitem__(done, numpy.asarray(src)[done]), final_obs, final)
        return state.fin.copy()

    def close(self) -> None:
        self.env.close()


def as_batch(envs: Any) -> EnvList | VectorEnvBatch:
    """Wrap a list of envs, a single env or a vector env (batches pass through)."""
    if isinstance(envs, (EnvList, VectorEnvBatch)):
        return envs
    if is_vector_env(envs):
        return VectorEnvBatch(envs)
    if isinstance(envs, (list, tuple)):
        return EnvList(envs)
    if hasattr(envs, "step") and hasattr(envs, "reset"):
        return EnvList([envs])
    raise TypeError(f"envs: expected a list of gymnasium envs or a vector env, got {type(envs).__name__}")


def make_batch(factory: Callable[..., Any], n_envs: int, seeds: Sequence[int]) -> EnvList | VectorEnvBatch:
    """Build a batch of ``n_envs`` envs from ``factory(seed=...)`` and seed them.

    If the factory returns a vector env, it must hold exactly ``n_envs`` envs and is
    called once (seeded with ``seeds[0]``); otherwise it is called once per env.
    """
    if len(seeds) != n_envs:
        raise ValueError(f"seeds: expected {n_envs} seeds, got {len(seeds)}")
    first = factory(seed=int(seeds[0]))
    if is_vector_env(first):
        if int(first.num_envs) != n_envs:
            raise ValueError(f"factory: expected a vector env of {n_envs} envs, got num_envs={first.num_envs}")
        first.reset(seed=int(seeds[0]))
        first.action_space.seed(int(seeds[0]))
        return VectorEnvBatch(first)
    envs = [first] + [factory(seed=int(seed)) for seed in seeds[1:]]
    for env, seed in zip(envs, seeds):
        env.reset(seed=int(seed))
        env.action_space.seed(int(seed))
    return EnvList(envs)
