"""The env registry: a pluggy plugin manager over the ``kernelgym.envs`` entry points.

Built-in envs and third-party plugins register the same way (see
`kernelgym.envs.hookspecs`). Nothing is imported when ``kernelgym.envs`` is: the plugin
modules are loaded on the first lookup (`make`, `get_spec`, `list_envs`, or a gymnasium
make of a ``kernelgym/<id>``), once per process.

One bad plugin never takes the others down:

- a plugin that fails to import, or whose hook raises, is skipped with a
  `PluginLoadWarning` naming it and its distribution (the specs a generator hook
  yielded before it raised are kept). ``SystemExit`` raised by a plugin (``sys.exit`` at
  import) counts as such a failure; ``KeyboardInterrupt`` is the user's and always
  propagates;
- each spec a hook returns is checked on its own: one that is not an `EnvSpec`, fails
  the `EnvSpec` checks, or has an id gymnasium refuses (`gymnasium_id_problem`) is left
  out with a warning naming its id, its plugin and its distribution, and the plugin's
  other specs still load;
- an env id claimed by two plugins is dropped (neither claim is kept, so neither one is
  used silently), with a warning naming both distributions; `get_spec` and `make` of
  that id raise a `KeyError` naming both; every other id still works. Ids that only
  gymnasium tells apart from each other collide the same way: an unversioned ``Foo``
  and a versioned ``Foo-v0`` (gymnasium refuses to hold both) are both dropped;
- likewise for the ids distributions declare in the ``kernelgym.envs.ids`` group: a
  malformed or colliding declaration is left out of gymnasium with a warning naming the
  distribution (`checked_declarations`), so it never breaks ``import kernelgym.envs``.

Set ``KERNELGYM_NO_PLUGIN_AUTOLOAD=1`` to skip third-party entry points; plugins given to
`register_plugin` still work then.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import os
import threading
import warnings
from collections.abc import Callable
from importlib.metadata import entry_points

import pluggy
from gymnasium import error as gymnasium_error
from gymnasium.envs.registration import get_env_id, parse_env_id

from kernelgym.envs import hookspecs
from kernelgym.envs.spec import EnvSpec

__all__ = [
    "PluginLoadWarning",
    "declared_env_ids",
    "get_spec",
    "gymnasium_id_problem",
    "list_envs",
    "make",
    "register_plugin",
    "undeclaring_plugins",
]

logger = logging.getLogger(__name__)

NO_AUTOLOAD_ENV_VAR = "KERNELGYM_NO_PLUGIN_AUTOLOAD"
BUILTIN_DISTRIBUTION = "kernelgym-envs"
GYMNASIUM_NAMESPACE = "kernelgym"  # every id is "kernelgym/<id>" in gymnasium's registry

# What a plugin may raise that is reported instead of propagated: every error, and
# SystemExit (a plugin calling sys.exit must not end the user's program). KeyboardInterrupt
# and GeneratorExit are control flow of the caller and pass through.
PLUGIN_FAILURES = (Exception, SystemExit)


class PluginLoadWarning(UserWarning):
    """A plugin could not be imported, returned bad specs or claimed a taken id; the others still load."""


def _describe(error: BaseException) -> str:
    if isinstance(error, SystemExit):
        return f"it called sys.exit({error.code!r})"
    return f"{type(error).__name__}: {error}"


def _warn(message: str) -> None:
    warnings.warn(message, PluginLoadWarning, stacklevel=3)


def gymnasium_id_problem(env_id: str) -> str | None:
    """Why gymnasium cannot hold ``env_id`` as ``"kernelgym/<env_id>"``, or None when it can.

    gymnasium refuses an id that its ``[namespace/]name[-vN]`` pattern does not match (a
    space, say), and stores a non-canonical version under another key (``Foo-v01`` as
    ``Foo-v1``), so such an id is refused too.
    """
    gymnasium_id = f"{GYMNASIUM_NAMESPACE}/{env_id}"
    try:
        canonical = get_env_id(*parse_env_id(gymnasium_id))
    except gymnasium_error.Error as error:
        return str(error)
    if canonical != gymnasium_id:
        return f"gymnasium would hold {gymnasium_id!r} as {canonical!r}; write the version as in {canonical!r}"
    return None


def _gymnasium_collisions(env_ids) -> list[list[str]]:
    """Groups of ids gymnasium cannot hold together: an unversioned id and a versioned one of one name.

    ``env_ids`` must be ids without a `gymnasium_id_problem`.
    """
    by_name: dict[str, list[tuple[int | None, str]]] = {}
    for env_id in env_ids:
        _, name, version = parse_env_id(f"{GYMNASIUM_NAMESPACE}/{env_id}")
        by_name.setdefault(name, []).append((version, env_id))
    return [
        sorted(env_id for _, env_id in group)
        for group in by_name.values()
        if any(version is None for version, _ in group) and any(version is not None for version, _ in group)
    ]


COLLISION = "collide in gymnasium (it cannot hold an unversioned id next to a versioned id of the same name)"


class _Registry:
    def __init__(self):
        self._manager = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self._manager.add_hookspecs(hookspecs)
        self._lock = threading.RLock()
        self._autoloaded = False
        self._specs: dict[str, EnvSpec] | None = None
        # env id -> the (plugin, distribution) pairs that claimed it (or an id it collides with), for
        # ids claimed twice or colliding in gymnasium
        self._conflicts: dict[str, list[tuple[str, str | None]]] = {}
        # env id -> the other ids it collides with in gymnasium
        self._collisions: dict[str, list[str]] = {}
        # plugin object -> (plugin name, distribution name or None)
        self._origins: dict[int, tuple[str, str | None]] = {}
        self._listeners: list[Callable[[list[str]], object]] = []  # what a listener returns is unused
        self._entry_points: dict[str, list[tuple]] = {}  # group -> (entry point, distribution name)
        # env id -> its spec, from its declaring plugin alone, before every plugin is loaded
        self._declared_specs: dict[str, EnvSpec] = {}

    # ------------------------------------------------------------------ plugins
    def register(self, plugin, name: str | None = None, distribution: str | None = None) -> None:
        if isinstance(plugin, str):
            module_name = plugin
            try:
                plugin = importlib.import_module(module_name)
            except SystemExit as error:  # an explicit registration fails loudly, but as an error
                raise ImportError(
                    f"register_plugin plugin: importing {module_name!r} failed: {_describe(error)}"
                ) from error
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

    def add_listener(self, listener: Callable[[list[str]], object]) -> None:
        """Call ``listener(sorted ids)`` after every (re)collection of the specs."""
        with self._lock:
            self._listeners.append(listener)

    def _plugin_entry_points(self, group: str) -> list[tuple]:
        """(entry point, its distribution's name or None) of ``group`` that autoload may use
        (built-ins only when it is off).

        Each group is read once per registry: a scan of the installed distributions, and
        each distribution's name from its METADATA, cost tens of milliseconds apiece.
        """
        with self._lock:
            if group not in self._entry_points:
                self._entry_points[group] = [
                    (entry_point, entry_point.dist.name if entry_point.dist is not None else None)
                    for entry_point in entry_points(group=group)
                ]
            found = self._entry_points[group]
        if os.environ.get(NO_AUTOLOAD_ENV_VAR) == "1":
            return [(ep, distribution) for ep, distribution in found if distribution == BUILTIN_DISTRIBUTION]
        return list(found)

    def _autoload(self) -> None:
        if self._autoloaded:
            return
        self._autoloaded = True
        for entry_point, distribution in self._plugin_entry_points(hookspecs.ENTRY_POINT_GROUP):
            try:
                plugin = entry_point.load()
                self.register(plugin, name=entry_point.name, distribution=distribution)
            except PLUGIN_FAILURES as error:  # one broken plugin must not hide the others
                warnings.warn(
                    f"kernelgym env plugin {entry_point.name!r} ({entry_point.value}) from distribution "
                    f"{distribution!r} failed to load and was skipped: {_describe(error)}",
                    PluginLoadWarning,
                    stacklevel=2,
                )

    def declared_ids(self) -> list[str]:
        """The ids declared in the ``kernelgym.envs.ids`` group that gymnasium can hold (nothing imported)."""
        return sorted(self.checked_declarations()[0])

    def undeclaring_plugins(self) -> list[str]:
        """The plugin entry points (``name = module``) whose module declares no id, nothing imported.

        A plugin module declares its ids with entry points in the ``kernelgym.envs.ids``
        group of its own distribution whose value is that module; registered plugins
        (`register_plugin`) count as undeclaring too.
        """
        declaring = {
            (distribution, entry_point.value)
            for entry_point, distribution in self._plugin_entry_points(hookspecs.ID_ENTRY_POINT_GROUP)
        }
        undeclaring = [
            f"{entry_point.name} = {entry_point.value}"
            for entry_point, distribution in self._plugin_entry_points(hookspecs.ENTRY_POINT_GROUP)
            if (distribution, entry_point.value) not in declaring
        ]
        with self._lock:
            registered = {name for name, _ in self._origins.values()}
        plugins = self._plugin_entry_points(hookspecs.ENTRY_POINT_GROUP)
        return sorted(undeclaring + sorted(registered - {entry_point.name for entry_point, _ in plugins}))

    def checked_declarations(self) -> tuple[dict[str, list[str | None]], list[str]]:
        """The declared ids gymnasium can hold (with the distributions declaring each), and a message per id left out.

        Left out: a malformed id (`gymnasium_id_problem`) and every id of a group that
        collides in gymnasium (``Foo`` and ``Foo-v0``), each message naming the
        distributions that declare it.
        """
        declared: dict[str, list[str | None]] = {}
        for entry_point, distribution in self._plugin_entry_points(hookspecs.ID_ENTRY_POINT_GROUP):
            declared.setdefault(entry_point.name, []).append(distribution)
        problems = []
        for env_id in sorted(declared):
            problem = gymnasium_id_problem(env_id)
            if problem is not None:
                problems.append(
                    f"env id {env_id!r} declared in the {hookspecs.ID_ENTRY_POINT_GROUP!r} entry points "
                    f"of distribution {_distributions(declared[env_id])} is left out: {problem}"
                )
                del declared[env_id]
        for group in _gymnasium_collisions(declared):
            who = " and ".join(f"{env_id!r} (distribution {_distributions(declared.pop(env_id))})" for env_id in group)
            problems.append(
                f"env ids {who}, declared in the {hookspecs.ID_ENTRY_POINT_GROUP!r} entry points, "
                f"{COLLISION}; they are left out: rename one or uninstall all but one of them"
            )
        return declared, problems

    # -------------------------------------------------------------------- specs
    def declared_spec(self, env_id: str) -> EnvSpec | None:
        """The spec of ``env_id`` from the one plugin module that declares it, loading no other.

        Loading every plugin costs a second or more (each builds the dispatchers of all its
        kernels); `make` needs one. None when that cannot decide: the plugins are loaded
        already, ``env_id`` is declared by no module or by more than one, some plugin
        declares no ids (`undeclaring_plugins`: it could provide any id), or the declaring
        module fails or does not provide ``env_id``; then the caller loads them all, which
        reports any such failure. A plugin that honours its declarations cannot claim the
        id too, so a conflict needs an undeclared id, which loading that plugin warns about.
        """
        with self._lock:
            if self._specs is not None or self._autoloaded:
                return self._specs.get(env_id) if self._specs is not None else None
            if env_id in self._declared_specs:
                return self._declared_specs[env_id]
            declarations = [
                (distribution, entry_point.value)
                for entry_point, distribution in self._plugin_entry_points(hookspecs.ID_ENTRY_POINT_GROUP)
                if entry_point.name == env_id
            ]
            if len(declarations) != 1 or self.undeclaring_plugins():
                return None
            found = []
            for entry_point, distribution in self._plugin_entry_points(hookspecs.ENTRY_POINT_GROUP):
                if (distribution, entry_point.value) != declarations[0]:
                    continue
                try:
                    plugin = entry_point.load()
                    self.register(plugin, name=entry_point.name, distribution=distribution)
                except PLUGIN_FAILURES:  # loading them all reports it, with the other plugins
                    return None
                found += self._provided_specs(plugin, entry_point.name, distribution)
            matching = [spec for spec in found if spec.id == env_id]
            if len(matching) != 1:
                return None
            self._declared_specs[env_id] = matching[0]
            listeners = list(self._listeners)
        for listener in listeners:  # gymnasium completes the id's time limit
            listener([env_id])
        return matching[0]

    def known_conflicts(self) -> list[str]:
        """The ids left out for a conflict among the plugins collected so far (loads nothing)."""
        with self._lock:
            return sorted(self._conflicts)

    def specs(self) -> dict[str, EnvSpec]:
        with self._lock:
            self._autoload()
            if self._specs is None:
                self._specs, self._conflicts, self._collisions = self._collect()
                self._warn_about_undelivered_declarations()
                for listener in self._listeners:
                    listener(sorted(self._specs))
            return self._specs

    def _warn_about_undelivered_declarations(self) -> None:
        found = set(self._specs or ()) | set(self._conflicts)
        missing = [env_id for env_id in self.declared_ids() if env_id not in found]
        if missing:
            warnings.warn(
                f"env ids {missing} are declared in the {hookspecs.ID_ENTRY_POINT_GROUP!r} "
                f"entry points but no loaded plugin provides them",
                PluginLoadWarning,
                stacklevel=2,
            )

    def conflict(self, env_id: str) -> list[tuple[str, str | None]] | None:
        """The (plugin, distribution) pairs that claimed ``env_id``, when it was claimed twice."""
        with self._lock:
            self.specs()
            return self._conflicts.get(env_id)

    def _provided_specs(self, plugin, name: str, distribution: str | None) -> list[EnvSpec]:
        """The good specs ``plugin``'s hook returns; each bad one, or a hook that raises, is warned about."""
        where = f"kernelgym env plugin {name!r} (distribution {distribution!r})"
        specs = []
        try:
            provided = plugin.kernelgym_register_envs()
            if isinstance(provided, (str, bytes, EnvSpec)):
                raise TypeError(f"expected an iterable of EnvSpec objects, got {provided!r}")
            for item in provided:  # one at a time: a bad spec hides only itself
                spec = _checked_spec(item, where, name, distribution)
                if spec is not None:
                    specs.append(spec)
        except PLUGIN_FAILURES as error:  # a broken plugin is reported, others still work
            kept = (
                f"its specs yielded before the error are kept: {[spec.id for spec in specs]}"
                if specs
                else "it was skipped"
            )
            _warn(
                f"{where} failed in kernelgym_register_envs and {kept}: {_describe(error)} (an EnvSpec whose "
                f"construction raises ends the hook before it returns, so the plugin's other specs are lost "
                f"with it; see kernelgym.envs.hookspecs)"
            )
        return specs

    def _collect(self):
        """(specs by id, claimants of each id left out, the ids each colliding id collides with)."""
        claims: dict[str, list[EnvSpec]] = {}
        for registered_name, plugin in self._manager.list_name_plugin():  # registration order
            name, distribution = self._origins.get(id(plugin), (registered_name, None))
            for spec in self._provided_specs(plugin, name, distribution):
                claims.setdefault(spec.id, []).append(spec)
        self._warn_about_undeclared_ids(claims)
        conflicts, collisions = {}, {}
        for group in _gymnasium_collisions(claims):
            claimed = [spec for env_id in group for spec in claims[env_id]]
            who = " and ".join(
                f"{env_id!r} from {_claimants([(s.plugin, s.distribution) for s in claims[env_id]])}"
                for env_id in group
            )
            _warn(
                f"env ids {who} {COLLISION}; they are left out (the other ids still work): rename one or "
                f"uninstall all but one of them"
            )
            for env_id in group:
                conflicts[env_id] = [(spec.plugin, spec.distribution) for spec in claimed]
                collisions[env_id] = [other for other in group if other != env_id]
        specs = {}
        for env_id, claimed in claims.items():
            if env_id in conflicts:
                continue
            if len(claimed) == 1:
                specs[env_id] = claimed[0]
                continue
            conflicts[env_id] = [(spec.plugin, spec.distribution) for spec in claimed]
            _warn(
                f"env id {env_id!r} is claimed by {len(claimed)} plugins: {_claimants(conflicts[env_id])}; "
                f"it is left out (the other ids still work): uninstall all but one of them"
            )
        return specs, conflicts, collisions

    def _warn_about_undeclared_ids(self, claims: dict[str, list[EnvSpec]]) -> None:
        """Warn about ids that a plugin declaring some ids in metadata provides undeclared.

        The ``kernelgym`` command refuses an undeclared id without loading such a plugin
        (see `undeclaring_plugins`), so the plugin's author learns it here.
        """
        declared: dict[tuple[str | None, str], set[str]] = {}
        for entry_point, distribution in self._plugin_entry_points(hookspecs.ID_ENTRY_POINT_GROUP):
            declared.setdefault((distribution, entry_point.value), set()).add(entry_point.name)
        declared_anywhere = set().union(*declared.values())
        for env_id, claimed in claims.items():
            for spec in claimed:
                module = getattr(self._manager.get_plugin(spec.plugin), "__name__", None)
                if module is not None and (spec.distribution, module) in declared and env_id not in declared_anywhere:
                    _warn(
                        f"env id {env_id!r} of plugin {spec.plugin!r} (distribution {spec.distribution!r}) is not "
                        f"declared in its {hookspecs.ID_ENTRY_POINT_GROUP!r} entry points, which declare "
                        f"{sorted(declared[(spec.distribution, module)])}: the kernelgym command refuses it "
                        f"without loading plugins; declare it there"
                    )

    def conflicting_ids(self) -> list[str]:
        """The ids left out because two plugins claim them, or because they collide in gymnasium."""
        with self._lock:
            self.specs()
            return sorted(self._conflicts)

    def collisions(self, env_id: str) -> list[str]:
        """The ids ``env_id`` collides with in gymnasium (``Foo`` for ``Foo-v0``); [] when none."""
        with self._lock:
            self.specs()
            return self._collisions.get(env_id, [])


def _checked_spec(provided, where: str, name: str, distribution: str | None) -> EnvSpec | None:
    """``provided`` as the registry keeps it, or None (with a warning naming it) when it is bad."""
    if not isinstance(provided, EnvSpec):
        _warn(
            f"{where} returned {provided!r}, expected EnvSpec objects: it is left out (the plugin's other "
            f"specs still load)"
        )
        return None
    try:  # replace() runs every EnvSpec check again, on this spec alone
        spec = dataclasses.replace(provided, distribution=distribution, plugin=name)
    except PLUGIN_FAILURES as error:
        _warn(
            f"{where}: env {provided.id!r} is invalid and left out (the plugin's other specs still load): "
            f"{_describe(error)}"
        )
        return None
    problem = gymnasium_id_problem(spec.id)
    if problem is not None:
        _warn(
            f"{where}: env id {spec.id!r} is left out (the plugin's other specs still load), gymnasium "
            f"cannot register it: {problem}"
        )
        return None
    return spec


def _claimants(claims: list[tuple[str, str | None]] | None) -> str:
    return " and ".join(f"plugin {plugin!r} (distribution {distribution!r})" for plugin, distribution in claims or ())


def _distributions(names: list[str | None]) -> str:
    return " and ".join(repr(name) for name in dict.fromkeys(names))


_REGISTRY = _Registry()


def register_plugin(plugin, name: str | None = None) -> None:
    """Register an env plugin explicitly (a module, an importable module name, or an object).

    Works with ``KERNELGYM_NO_PLUGIN_AUTOLOAD=1`` too. Its ids reach gymnasium at once.

    Raises
    ------
    TypeError
        ``plugin`` has no ``kernelgym_register_envs`` hook implementation.
    ImportError
        ``plugin`` names a module that fails to import (or calls ``sys.exit``).
    """
    _REGISTRY.register(plugin, name=name)
    _REGISTRY.specs()  # collect now, so listeners (gymnasium) learn the new ids


def declared_env_ids() -> list[str]:
    """The env ids that installed plugins declare in their metadata, without importing them.

    A plugin declares an id with an entry point in the ``kernelgym.envs.ids`` group whose
    name is the id (see `kernelgym.envs.hookspecs`). These are what gymnasium learns at
    ``import kernelgym.envs``; `list_envs` is the authority once plugins are loaded. A
    malformed id, or ids that collide in gymnasium, are left out (``import kernelgym.envs``
    warns about them).
    """
    return _REGISTRY.declared_ids()


def undeclaring_plugins() -> list[str]:
    """The installed or registered plugins whose ids are not declared in metadata, nothing imported.

    When this is empty, `declared_env_ids` names every id a plugin is expected to provide,
    so an id outside it can be refused without importing any plugin (the ``kernelgym``
    command does). A plugin module that declares some of its ids is taken to declare all
    of them; loading it warns about any id it provides undeclared.

    Returns
    -------
    list of str
        ``"name = module"`` of each entry point whose module declares no id in the
        ``kernelgym.envs.ids`` group of its distribution, and the name of each plugin
        given to `register_plugin`.
    """
    return _REGISTRY.undeclaring_plugins()


def list_envs() -> list[str]:
    """The ids of every registered env, sorted (ids claimed by two plugins are left out)."""
    return sorted(_REGISTRY.specs())


def get_spec(env_id: str) -> EnvSpec:
    """The `EnvSpec` of ``env_id`` (``.distribution`` and ``.plugin`` name its provider).

    Raises
    ------
    KeyError
        ``env_id`` is not registered (the message lists the known ids), or two plugins
        claim it (the message names both).
    """
    if not isinstance(env_id, str):
        raise TypeError(f"env_id: expected a str, got {type(env_id).__name__} {env_id!r}")
    key = env_id.removeprefix("kernelgym/")
    declared = _REGISTRY.declared_spec(key)
    if declared is not None:
        return declared
    specs = _REGISTRY.specs()
    if key in specs:
        return specs[key]
    claims = _REGISTRY.conflict(key)
    collides = _REGISTRY.collisions(key)
    if collides:
        raise KeyError(
            f"env_id: {env_id!r} and {collides} {COLLISION}; claimed by {_claimants(claims)}, so "
            f"none is used; rename one or uninstall all but one of them"
        )
    if claims:
        raise KeyError(
            f"env_id: {env_id!r} is claimed by {_claimants(claims)}, so neither is used; uninstall all but one of them"
        )
    raise KeyError(f"env_id: unknown env {env_id!r}; registered envs: {sorted(specs)}")


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
        ``autoreset_mode`` ("next_step" or "same_step"), ``max_episode_steps``,
        ``precision`` ("float64" or "float32" for envs that declare the choice, see
        `KernelVectorEnv`), ``fast_math`` (True: FMA contraction on, within the kit's
        stated tolerance of the default build), ``check_action_values``, and overrides
        of the env's params fields (validated).
    """
    from kernelgym.envs.vector_env import KernelVectorEnv

    spec = get_spec(env_id)
    env = KernelVectorEnv(spec, num_envs, backend=backend, seed=seed, **kwargs)
    logger.info(
        "made %s: %d envs on backend %r, %s, autoreset %s, seed %s",
        spec.id,
        env.num_envs,
        env.backend,
        env.precision,
        env.autoreset_mode.value,
        seed,
    )
    return env
