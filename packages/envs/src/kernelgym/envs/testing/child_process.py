"""The kit's child processes: the ``gpu_compile`` check's and a check run beside the others.

Each runs ``python -m MODULE ...`` with this process's import path (a test module's specs, for
one) and writes its stderr to ``FOLDER/stderr.txt``: a pipe nobody reads while the other checks
run would stall the child once full.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

__all__ = ["read_stderr", "start_child", "stop_child", "transportable_env"]


def start_child(module: str, arguments: list[str], folder: str, environment: dict) -> subprocess.Popen:
    """Start ``python -m module *arguments`` with ``environment`` and this process's import path."""
    environment = {**environment, "PYTHONPATH": os.pathsep.join(path for path in sys.path if path)}
    with open(os.path.join(folder, "stderr.txt"), "w") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", module, *arguments], env=environment, stdout=subprocess.DEVNULL, stderr=stderr
        )


def read_stderr(folder: str) -> str:
    """What the child started in ``folder`` wrote to stderr."""
    with open(os.path.join(folder, "stderr.txt")) as file:
        return file.read()


def stop_child(process: subprocess.Popen) -> None:
    """Kill the child if it still runs, and reap it."""
    if process.poll() is None:
        process.kill()
        process.wait()


def transportable_env(env):
    """``env`` (an id or an `EnvSpec`) as a child process can receive it: the id, a picklable spec,
    or ``"module:attr"`` of a module holding it; a TypeError naming the env otherwise."""
    if isinstance(env, str):
        return env
    try:
        pickle.dumps(env)
        return env
    except Exception as error:
        if getattr(env, "distribution", None):
            return env.id  # registered by an installed distribution: the child finds it by id
        name = _module_attribute(env)
        if name is not None:
            return name  # e.g. a spec with a lambda (num_agents=lambda params: ...): the child imports it
        raise TypeError(
            f"env: the EnvSpec {getattr(env, 'id', env)!r} cannot be pickled for the kit's child processes "
            f"({type(error).__name__}: {error}); register it through an entry point or pass 'module:attr'"
        ) from error


def _module_attribute(env) -> str | None:
    """``"module:attr"`` of an importable module holding ``env`` as a global, or None."""
    for module_name, module in list(sys.modules.items()):
        if module_name == "__main__" or module is None:
            continue
        for attr, value in list(vars(module).items()):
            if value is env:
                return f"{module_name}:{attr}"
    return None
