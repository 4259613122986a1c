"""kernelgym's env ids in gymnasium's registry, as ``"kernelgym/<id>"``.

``import kernelgym.envs`` calls `install`: it registers the ids that installed plugins
declare in their metadata (no plugin module is imported) and subscribes to the kernelgym
registry, so that every id found later (an undeclared one, or one given to
`kernelgym.envs.register_plugin`) is registered too. Each id gets a single-env entry
point (`kernelgym.envs.gymnasium_env.KernelGymnasiumEnv`, for ``gymnasium.make`` and
``make_vec``'s sync/async modes), the vector entry point and the env's time limit. The
time limit is in the spec, which only a loaded plugin gives: a declared id is
registered without it and completed in place when the plugins load, which
``gymnasium.make`` does before it reads the limit (creating the env loads them). The
entry points are import strings, so gymnasium imports the adapters only when an env is
made. This module reads the kernelgym registry; the registry never imports it.
"""

from __future__ import annotations

import gymnasium
from gymnasium.envs.registration import registry as gymnasium_registry

from kernelgym.envs import registry

__all__ = ["ENTRY_POINT", "GYMNASIUM_NAMESPACE", "VECTOR_ENTRY_POINT", "install", "register_gymnasium_envs"]

GYMNASIUM_NAMESPACE = "kernelgym"
ENTRY_POINT = "kernelgym.envs.gymnasium_env:KernelGymnasiumEnv"
VECTOR_ENTRY_POINT = "kernelgym.envs.gymnasium_adapter:KernelGymnasiumVectorEnv"


def register_gymnasium_envs(env_ids=None) -> list[str]:
    """Register ``"kernelgym/<id>"`` with gymnasium, time limit included, for each of ``env_ids``.

    Idempotent: an id already registered (declared at import) gets its time limit.

    Parameters
    ----------
    env_ids : iterable of str, optional
        Default: every registered kernelgym env. Reading the specs loads the plugins.

    Returns
    -------
    list of str
        The gymnasium ids newly registered by this call.
    """
    if env_ids is None:
        env_ids = registry.list_envs()
    return [f"{GYMNASIUM_NAMESPACE}/{env_id}" for env_id in env_ids
            if _register(env_id, registry.get_spec(env_id).resolve().max_episode_steps)]


def _register(env_id: str, max_episode_steps: int | None) -> bool:
    """Register one id, or complete its time limit if it is there already; True if new."""
    gymnasium_id = f"{GYMNASIUM_NAMESPACE}/{env_id}"
    registered = gymnasium_registry.get(gymnasium_id)
    if registered is not None:
        registered.max_episode_steps = max_episode_steps
        return False
    gymnasium.register(id=gymnasium_id, entry_point=ENTRY_POINT, vector_entry_point=VECTOR_ENTRY_POINT,
                       max_episode_steps=max_episode_steps, kwargs={"env_id": env_id})
    return True


def install() -> None:
    """Register the declared ids now and complete them (and add new ids) when the plugins load."""
    for env_id in registry.declared_env_ids():
        _register(env_id, max_episode_steps=None)
    registry._REGISTRY.add_listener(register_gymnasium_envs)
