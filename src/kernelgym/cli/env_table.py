"""The table `kernelgym list` prints: every registered env and who provides it."""

from __future__ import annotations

import sys

from gymnasium import spaces
from rich.console import Console
from rich.table import Table

import kernelgym.envs as kge

__all__ = ["describe_space", "env_rows", "print_env_table"]

COLUMNS = ("env", "plugin", "distribution", "agents", "observation", "action", "description")


def describe_space(space: spaces.Space) -> str:
    """A short one-line description of a space (gymnasium's repr prints every bound)."""
    if isinstance(space, spaces.Discrete):
        return f"Discrete({space.n})"
    if isinstance(space, spaces.MultiDiscrete):
        return f"MultiDiscrete({space.nvec.tolist()})"
    if isinstance(space, spaces.Box):
        return f"Box{space.shape} {space.dtype}"
    return str(space)


def env_rows() -> list[dict[str, str]]:
    """One row per registered env id, in `kernelgym.envs.list_envs` order (no kernel is compiled)."""
    rows = []
    for env_id in kge.list_envs():
        spec = kge.get_spec(env_id)
        resolved = spec.resolve()
        rows.append({
            "env": env_id,
            "plugin": str(spec.plugin),
            "distribution": str(spec.distribution),
            "agents": str(resolved.num_agents),
            "observation": describe_space(resolved.observation_space),
            "action": describe_space(resolved.action_space),
            "description": spec.description,
        })
    return rows


def print_env_table() -> None:
    """Print `env_rows` as a table (wide enough not to fold ids when piped to a file)."""
    console = Console() if sys.stdout.isatty() else Console(width=200)
    table = Table(title="registered kernelgym envs")
    for column in COLUMNS:
        table.add_column(column, overflow="fold")
    for row in env_rows():
        table.add_row(*(row[column] for column in COLUMNS))
    console.print(table)
