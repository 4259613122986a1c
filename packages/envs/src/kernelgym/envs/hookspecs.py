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
"""

import pluggy

PROJECT_NAME = "kernelgym.envs"
ENTRY_POINT_GROUP = "kernelgym.envs"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def kernelgym_register_envs():
    """Return the `kernelgym.envs.spec.EnvSpec` objects this plugin provides.

    Returns
    -------
    iterable of EnvSpec
    """
