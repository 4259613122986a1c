"""kernelgym.envs: Numba environments as pluggy plugins, run by `KernelVectorEnv`.

```python
import kernelgym.envs as kge

env = kge.make("CartPole-v1", num_envs=4096, seed=0)
obs, info = env.reset()
obs, reward, terminated, truncated, info = env.step(actions)
```

Importing this package imports no env plugin: plugins load on the first lookup
(`make`, `get_spec`, `list_envs`). It registers the env ids that plugins declare in
their metadata with gymnasium as ``"kernelgym/<id>"``
(``gymnasium.make_vec(..., vectorization_mode="vector_entry_point")``), and every other
id as soon as the plugins are loaded (see `kernelgym.envs.gymnasium_registration`).
"""

from importlib import metadata as _metadata

from kernelgym.envs import gymnasium_registration
from kernelgym.envs.hookspecs import hookimpl
from kernelgym.envs.registry import PluginLoadWarning, get_spec, list_envs, make, register_plugin
from kernelgym.envs.spec import CPUReference, EnvSpec, StateArray

__version__ = _metadata.version("kernelgym-envs")  # set by the repository's VERSION file

__all__ = [
    "CPUReference",
    "EnvSpec",
    "KernelVectorEnv",
    "PluginLoadWarning",
    "StateArray",
    "get_spec",
    "hookimpl",
    "list_envs",
    "make",
    "register_plugin",
]


def __getattr__(name):
    # The runtime imports torch; keep `import kernelgym.envs` light until it is needed.
    if name == "KernelVectorEnv":
        from kernelgym.envs.vector_env import KernelVectorEnv

        return KernelVectorEnv
    raise AttributeError(f"module 'kernelgym.envs' has no attribute {name!r}")


gymnasium_registration.install()
