"""The env registry: a pluggy plugin manager over the ``kernelgym.envs`` entry points.

Built-in envs and third-party plugins register the same way (see
`kernelgym.envs.hookspecs`). Plugins are loaded on first use, once per process.
Set ``KERNELGYM_NO_PLUGIN_AUTOLOAD=1`` to skip entry-point loading; plugins given to
`register_plugin` still work then.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import threading
import warnings
from importlib.metadata import entry_points

import pluggy

from kernelgym.envs import hookspecs
from kernelgym.envs.spec import EnvSpec

__all__ = ["PluginLoadWarning", "get_spec", "list_envs", "make", "register_plugin"]

NO_AUTOLOAD_ENV_VAR = "KERNELGYM_NO_PLUGIN_AUTOLOAD"


class PluginLoadWarning(UserWarning):
    """A plugin could not be imported or returned bad specs; the other plugins still load."""


class _Registry:
    def __init__(self):
        self._manager = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self._manager.add_hookspecs(hookspecs)
        self._lock = threading.RLock()
        self._autoloaded = False
        self._specs: dict[str, EnvSpec] | None = None
        # plugin object -> (plugin name, distribution name or None)
        self._origins: dict[int, tuple[str, str | None]] = {}

    # ------------------------------------------------------------------ plugins
    def register(self, plugin, name: str | None = None, distribution: str | None = None) -> None:
        if isinstance(plugin, str):
            plugin = importlib.import_module(plugin)
        if not hasattr(plugin, "kernelgym_register_envs"):
            raise TypeError(
                f"register_plugin plugin: expected a module or object with a @hookimpl "
                f"kernelgym_register_envs function, got {plugin!r}"
            )
        with self._lock:
            if self._manager.is_registered(plugin):
                return
            name = name or getattr(plugin, "__name__", None) or repr(plugin)
            self._manager.register(plugin, name=name)
            self._origins[id(plugin)] = (name, distribution)
            self._specs = None  # rebuilt on next lookup, so id conflicts surface there

    def _autoload(self) -> None:
        if self._autoloaded:
            return
        self._autoloaded = True
        if os.environ.get(NO_AUTOLOAD_ENV_VAR) == "1":
            self._register_builtins()
            return
        for entry_point in entry_points(group=hookspecs.ENTRY_POINT_GROUP):
            distribution = entry_point.dist.name if entry_point.dist is not None else None
            try:
                plugin = entry_point.load()
            except Exception as error:  # noqa: BLE001 - one broken plugin must not hide the others
                warnings.warn(
                    f"kernelgym env plugin {entry_point.name!r} ({entry_point.value}) from distribution "
                    f"{distribution!r} failed to load and was skipped: {type(error).__name__}: {error}",
                    PluginLoadWarning,
                    stacklevel=3,
                )
                continue
            self.register(plugin, name=entry_point.name, distribution=distribution)

    def _register_builtins(self) -> None:
        """Built-ins without the entry-point scan (autoload off): this package's own group entries."""
        for entry_point in entry_points(group=hookspecs.ENTRY_POINT_GROUP):
            if entry_point.dist is not None and entry_point.dist.name == "kernelgym-envs":
                try:
                    plugin = entry_point.load()
                except ImportError as error:
                    warnings.warn(
                        f"built-in env module {entry_point.value} failed to import: {error}",
                        PluginLoadWarning,
                        stacklevel=3,
                    )
                    continue
                self.register(plugin, name=entry_point.name, distribution="kernelgym-envs")

    # -------------------------------------------------------------------- specs
    def specs(self) -> dict[str, EnvSpec]:
        with self._lock:
            self._autoload()
            if self._specs is None:
                self._specs = self._collect()
            return self._specs

    def _collect(self) -> dict[str, EnvSpec]:
        specs: dict[str, EnvSpec] = {}
        for registered_name, plugin in self._manager.list_name_plugin():  # registration order
            name, distribution = self._origins.get(id(plugin), (registered_name, None))
            hook = getattr(plugin, "kernelgym_register_envs")
            try:
                provided = list(hook())
                bad = [spec for spec in provided if not isinstance(spec, EnvSpec)]
                if bad:
                    raise TypeError(f"expected EnvSpec objects, got {bad!r}")
            except Exception as error:  # noqa: BLE001 - a broken plugin is reported, others still work
                warnings.warn(
                    f"kernelgym env plugin {name!r} (distribution {distribution!r}) failed in "
                    f"kernelgym_register_envs and was skipped: {type(error).__name__}: {error}",
                    PluginLoadWarning,
                    stacklevel=4,
                )
                continue
            for spec in provided:
                spec = dataclasses.replace(spec, distribution=distribution, plugin=name)
                if spec.id in specs:
                    first = specs[spec.id]
                    raise ValueError(
                        f"env id {spec.id!r} is registered twice: by plugin {first.plugin!r} "
                        f"(distribution {first.distribution!r}) and by plugin {spec.plugin!r} "
                        f"(distribution {spec.distribution!r}); uninstall one of them"
                    )
                specs[spec.id] = spec
        return specs


_REGISTRY = _Registry()


def register_plugin(plugin, name: str | None = None) -> None:
    """Register an env plugin explicitly (a module, an importable module name, or an object).

    Works with ``KERNELGYM_NO_PLUGIN_AUTOLOAD=1`` too.

    Raises
    ------
    TypeError
        ``plugin`` has no ``kernelgym_register_envs`` hook implementation.
    """
    _REGISTRY.register(plugin, name=name)
    _register_gymnasium_ids()


def list_envs() -> list[str]:
    """The ids of every registered env, sorted."""
    return sorted(_REGISTRY.specs())


def get_spec(env_id: str) -> EnvSpec:
    """The `EnvSpec` of ``env_id`` (``.distribution`` and ``.plugin`` name its provider).

    Raises
    ------
    KeyError
        ``env_id`` is not registered; the message lists the known ids.
    """
    if not isinstance(env_id, str):
        raise TypeError(f"env_id: expected a str, got {type(env_id).__name__} {env_id!r}")
    specs = _REGISTRY.specs()
    key = env_id.removeprefix("kernelgym/")
    if key not in specs:
        raise KeyError(f"env_id: unknown env {env_id!r}; registered envs: {sorted(specs)}")
    return specs[key]


def make(env_id: str, num_envs: int, backend: str | None = "auto", seed: int | None = None, **kwargs):
    """Create a `KernelVectorEnv` of ``num_envs`` copies of ``env_id``.

    Parameters
    ----------
    env_id : str
        A registered id (``list_envs()``), optionally prefixed ``"kernelgym/"``.
    num_envs : int
    backend : {"auto", "cpu", "cuda", "sim"} or None
        None reads ``KERNELGYM_BACKEND``.
    seed : int or None
        Seeds one RNG stream per env (None: fresh OS entropy).
    **kwargs
        ``autoreset_mode`` ("next_step" or "same_step"), ``max_episode_steps``, and
        overrides of the env's params fields (validated).
    """
    from kernelgym.envs.vector_env import KernelVectorEnv

    return KernelVectorEnv(get_spec(env_id), num_envs, backend=backend, seed=seed, **kwargs)


def _register_gymnasium_ids() -> None:
    from kernelgym.envs.gymnasium_adapter import register_gymnasium_envs

    register_gymnasium_envs(list_envs())
