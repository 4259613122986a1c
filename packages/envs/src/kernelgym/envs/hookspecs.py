"""The pluggy hook through which env plugins (built-in and third-party) declare envs.

A plugin is any module or object with a function marked ``@hookimpl`` named
``kernelgym_register_envs``. It is found through the ``kernelgym.envs`` entry-point
group (``[project.entry-points."kernelgym.envs"]`` in the plugin's pyproject.toml) or
given explicitly to `kernelgym.envs.register_plugin`::

    from kernelgym.envs.hookspecs import hookimpl

    @hookimpl
    def kernelgym_register_envs():
        return [SPEC]

The hook must be cheap: build `EnvSpec` objects only; never compile kernels here.

Each spec the hook returns is checked on its own: one that is not an `EnvSpec`, or whose
id gymnasium refuses or another plugin claims, is left out with a
`kernelgym.envs.PluginLoadWarning` naming its id and the plugin, and the plugin's other
specs still load. The limit: an `EnvSpec` whose construction raises (a Dict observation
space, say) raises inside the module's import or the hook, before anything is returned,
so the warning can name only the plugin and the error, and the plugin's other specs are
lost with it. A hook that yields its specs one by one (a generator) keeps those yielded
before the error; a plugin module per env keeps the others whole.

A plugin also declares its env ids in its metadata, one entry point per id in the
``kernelgym.envs.ids`` group (name: the id; value: the plugin module, for the reader)::

    [project.entry-points."kernelgym.envs.ids"]
    "GoRight-v0" = "kernelgym_example_plugin.go_right"

so that ``import kernelgym.envs`` registers ``"kernelgym/<id>"`` with gymnasium without
importing any plugin. An undeclared id still works everywhere; gymnasium learns it at the
first kernelgym lookup (`list_envs`, `make`, ...).

Declarations also make things fast: ``make`` of a declared id loads only the module that
declares it (every plugin loads at the first `list_envs`, or lookup of an undeclared id),
and the ``kernelgym`` command refuses an id nobody declares without importing any plugin.
Both rely on a module that declares ids declaring all of its ids: one it provides
undeclared is warned about when it loads. While any plugin declares no ids at all, every
lookup loads every plugin, as it must to find them.
"""

import pluggy

PROJECT_NAME = "kernelgym.envs"
ENTRY_POINT_GROUP = "kernelgym.envs"
ID_ENTRY_POINT_GROUP = "kernelgym.envs.ids"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def kernelgym_register_envs():
    """Return the `kernelgym.envs.spec.EnvSpec` objects this plugin provides.

    Returns
    -------
    iterable of EnvSpec
    """
