"""The table `kernelgym list` prints: every registered env and who provides it."""

from __future__ import annotations

import sys

from gymnasium import spaces
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

import kernelgym.envs as kge

__all__ = ["describe_space", "env_rows", "print_env_table"]

TABLE_WIDTH = 80  # the table fits a classic terminal: long cells wrap at spaces, ids never break
# Column widths: "Box(4,) float32" and "Discrete(2)" stay on one line; longer cells wrap at
# spaces. The provider (plugin and distribution) and the description go under the id, in the
# env column, which takes the width left over (3 columns between neighbours: padding, rule,
# padding): at 80 columns, 38, more than any id or plugin name.
WIDTHS = {"agents": 6, "observation": 16, "action": 11}
GAP = 3


def describe_space(space: spaces.Space) -> str:
    """A short one-line description of a space (gymnasium's repr prints every bound)."""
    if isinstance(space, spaces.Discrete):
        return f"Discrete({space.n})"
    if isinstance(space, spaces.MultiDiscrete):
        return f"MultiDiscrete({space.nvec.tolist()})"
    if isinstance(space, spaces.Box):
        return f"Box{space.shape} {space.dtype}"
    if isinstance(space, spaces.MultiBinary):
        return f"MultiBinary({space.n})"
    if isinstance(space, spaces.Dict):
        return "Dict(" + ", ".join(f"{key}: {describe_space(part)}" for key, part in space.spaces.items()) + ")"
    if isinstance(space, spaces.Tuple):
        return "Tuple(" + ", ".join(describe_space(part) for part in space.spaces) + ")"
    return str(space)


def env_rows() -> list[dict[str, str]]:
    """One row per registered env id, in `kernelgym.envs.list_envs` order (no kernel is compiled)."""
    rows = []
    for env_id in kge.list_envs():
        spec = kge.get_spec(env_id)
        resolved = spec.resolve()
        rows.append(
            {
                "env": env_id,
                "plugin": str(spec.plugin),
                "distribution": str(spec.distribution),
                "agents": str(resolved.num_agents),
                "observation": describe_space(resolved.observation_space),
                "action": describe_space(resolved.action_space),
                "description": spec.description,
            }
        )
    return rows


def print_env_table(console: Console | None = None) -> None:
    """Print `env_rows` as a table at most `TABLE_WIDTH` columns wide (narrower on a narrower terminal)."""
    if console is None:
        width = min(TABLE_WIDTH, Console().width) if sys.stdout.isatty() else TABLE_WIDTH
        console = Console(width=width)
    table = Table(title="registered kernelgym envs", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column(
        "env / provider / description",
        overflow="fold",
        width=console.width - sum(WIDTHS.values()) - GAP * len(WIDTHS),
    )
    for column, width in WIDTHS.items():
        table.add_column(column, overflow="fold", width=width)
    for row in env_rows():
        env = Text(row["env"], style="bold")
        env.append(f"\n{row['plugin']} ({row['distribution']})")
        env.append("\n" + row["description"], style="dim")
        table.add_row(env, *(row[column] for column in WIDTHS))
    console.print(table)
