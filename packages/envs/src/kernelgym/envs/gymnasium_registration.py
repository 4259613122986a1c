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

No plugin's id can break the import or another id: malformed and colliding declared ids
are left out with a `PluginLoadWarning` (`kernelgym.envs.registry`), and an id gymnasium
still refuses (one that collides with an id already in gymnasium's registry) is left out
of gymnasium with a warning naming its distribution. An id two plugins claim is registered
too (where gymnasium can hold it), so that ``gymnasium.make`` and ``make_vec`` of it raise
kernelgym's error naming both distributions instead of gymnasium's "doesn't exist".
"""

from __future__ import annotations

import warnings

import gymnasium
from gymnasium import error as gymnasium_error
from gymnasium.envs.registration import registry as gymnasium_registry

from kernelgym.envs import registry

__all__ = [
    "ENTRY_POINT",
    "GYMNASIUM_NAMESPACE",
    "VECTOR_ENTRY_POINT",
    "install",
    "register_conflicting_ids",
    "register_gymnasium_envs",
]

GYMNASIUM_NAMESPACE = registry.GYMNASIUM_NAMESPACE
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
    registered = []
    for env_id in env_ids:
        spec = registry.get_spec(env_id)
        provider = f"plugin {spec.plugin!r} (distribution {spec.distribution!r})"
        if _register(env_id, spec.resolve().max_episode_steps, provider):
            registered.append(f"{GYMNASIUM_NAMESPACE}/{env_id}")
    return registered


def _register(env_id: str, max_episode_steps: int | None, provider: str) -> bool:
    """Register one id, or complete its time limit if it is there already; True if new.

    An id gymnasium refuses is left out of gymnasium with a warning naming ``provider``.
    """
    gymnasium_id = f"{GYMNASIUM_NAMESPACE}/{env_id}"
    registered = gymnasium_registry.get(gymnasium_id)
    if registered is not None:
        registered.max_episode_steps = max_episode_steps
        return False
    try:
        gymnasium.register(
            id=gymnasium_id,
            entry_point=ENTRY_POINT,
            vector_entry_point=VECTOR_ENTRY_POINT,
            max_episode_steps=max_episode_steps,
            kwargs={"env_id": env_id},
        )
    except gymnasium_error.Error as error:  # one id must not break the import or the other ids
        warnings.warn(
            f"env id {env_id!r} of {provider} is left out of gymnasium's registry (kernelgym's own "
            f"make still has it): gymnasium refused {gymnasium_id!r}: {error}",
            registry.PluginLoadWarning,
            stacklevel=3,
        )
        return False
    return True


def register_conflicting_ids(_env_ids=None) -> None:
    """Register each id the kernelgym registry left out for a conflict (already warned about),
    so that making it reaches `kernelgym.envs.registry.get_spec`, whose error names the
    claimants; an id gymnasium refuses (``Foo`` beside ``Foo-v0``) stays out. Reads the
    conflicts found so far: a listener runs after each collection, and loads nothing."""
    for env_id in registry._REGISTRY.known_conflicts():
        gymnasium_id = f"{GYMNASIUM_NAMESPACE}/{env_id}"
        if gymnasium_id in gymnasium_registry:
            continue
        try:
            gymnasium.register(
                id=gymnasium_id,
                entry_point=ENTRY_POINT,
                vector_entry_point=VECTOR_ENTRY_POINT,
                kwargs={"env_id": env_id},
            )
        except gymnasium_error.Error:
            pass  # its conflict was warned about when the plugins loaded


def install() -> None:
    """Register the declared ids now and complete them (and add new ids) when the plugins load."""
    declared, problems = registry._REGISTRY.checked_declarations()
    for problem in problems:
        warnings.warn(problem, registry.PluginLoadWarning, stacklevel=2)
    for env_id, distributions in sorted(declared.items()):
        _register(env_id, None, f"distribution {registry._distributions(distributions)}")
    registry._REGISTRY.add_listener(register_gymnasium_envs)
    registry._REGISTRY.add_listener(register_conflicting_ids)
