"""kernelgym's env ids in gymnasium's registry, as ``"kernelgym/<id>"``.

``import kernelgym.envs`` calls `install`: it registers the ids that installed plugins
declare in their metadata (no plugin module is imported) and subscribes to the kernelgym
registry, so that every id found later (an undeclared one, or one given to
`kernelgym.envs.register_plugin`) is registered too. The entry points are import
strings, so gymnasium imports the adapter only when an env is made. This module reads
the kernelgym registry; the registry never imports it.
"""

from __future__ import annotations

import gymnasium
from gymnasium.envs.registration import registry as gymnasium_registry

from kernelgym.envs import registry

__all__ = ["GYMNASIUM_NAMESPACE", "VECTOR_ENTRY_POINT", "install", "register_gymnasium_envs"]

GYMNASIUM_NAMESPACE = "kernelgym"
VECTOR_ENTRY_POINT = "kernelgym.envs.gymnasium_adapter:KernelGymnasiumVectorEnv"


def register_gymnasium_envs(env_ids=None) -> list[str]:
    """Register ``"kernelgym/<id>"`` with gymnasium for each of ``env_ids`` (idempotent).

    Parameters
    ----------
    env_ids : iterable of str, optional
        Default: every registered kernelgym env (this loads the plugins).

    Returns
    -------
    list of str
        The gymnasium ids registered by this call.
    """
    if env_ids is None:
        env_ids = registry.list_envs()
    added = []
    for env_id in env_ids:
        gymnasium_id = f"{GYMNASIUM_NAMESPACE}/{env_id}"
        if gymnasium_id in gymnasium_registry:
            continue
        gymnasium.register(id=gymnasium_id, vector_entry_point=VECTOR_ENTRY_POINT, kwargs={"env_id": env_id})
        added.append(gymnasium_id)
    return added


def install() -> None:
    """Register the declared ids now and every id the kernelgym registry collects later."""
    register_gymnasium_envs(registry.declared_env_ids())
    registry._REGISTRY.add_listener(register_gymnasium_envs)
