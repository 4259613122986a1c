"""Write one docs page per built-in env (docs/envs/), generated from its registered EnvSpec.

Run from the repository root with kernelgym-envs and kernelgym-minatar installed:
`python tools/gen_env_pages.py`. `--check` writes nothing and exits 1 when a page is not
what the specs give (tests/test_env_pages.py runs it in the integration env). The spaces,
agents, time limit, precisions and params (with their defaults and which may differ per
env) come from the spec; the rules come from the docstring of the module that defines the
env's step kernel; the meaning of each observation entry and action of the classic-control
envs, whose docstrings do not list them, is written here (`ENTRIES`).
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import sys
from pathlib import Path

import numpy as np
from gymnasium import spaces

ROOT = Path(__file__).resolve().parents[1]
PAGES = ROOT / "docs" / "envs"
BUILT_IN = ("kernelgym-envs", "kernelgym-minatar")


@dataclasses.dataclass(frozen=True)
class Entries:
    """What an env's docstring does not say: observation entries, actions, reward, episode end."""

    observation: tuple[str, ...]
    actions: tuple[str, ...]
    reward: str
    termination: str


ENTRIES = {
    "CartPole-v1": Entries(
        ("cart position (m)", "cart velocity (m/s)", "pole angle (rad, 0 upright)", "pole angular velocity (rad/s)"),
        ("push the cart left", "push the cart right"),
        "+1 for every step, the terminating one included (`sutton_barto_reward`: 0 per step, -1 on termination)",
        "the pole angle leaves ±`theta_threshold_radians` (12°) or the cart position leaves ±`x_threshold` (2.4)",
    ),
    "Acrobot-v1": Entries(
        (
            "cos of the first joint angle",
            "sin of the first joint angle",
            "cos of the second joint angle (relative to the first link)",
            "sin of the second joint angle",
            "angular velocity of the first joint (rad/s)",
            "angular velocity of the second joint (rad/s)",
        ),
        ("torque -1 on the second joint", "torque 0", "torque +1"),
        "-1 for every step that does not reach the goal, 0 for the step that does",
        "the free end rises above the bar: `-cos(θ1) - cos(θ1 + θ2) > 1`",
    ),
    "Pendulum-v1": Entries(
        ("cos of the angle (1 upright)", "sin of the angle", "angular velocity (rad/s)"),
        ("the torque, clipped to ±`max_torque` (a Box of one float)",),
        "-(θ² + 0.1 θ̇² + 0.001 torque²), θ normalised to [-π, π]: 0 at best, upright and still",
        "never: episodes end by truncation only",
    ),
    "MountainCar-v0": Entries(
        ("car position (the valley's bottom is near -0.52)", "car velocity"),
        ("accelerate left", "do not accelerate", "accelerate right"),
        "-1 for every step",
        "position >= `goal_position` (0.5) with velocity >= `goal_velocity` (0)",
    ),
}


def spec_module(spec):
    """The module that defines the env's (first) step kernel: its docstring gives the rules."""
    kernel = spec.load_kernels("step_kernel")[0]
    return sys.modules[kernel.py_func.__module__]


def describe_space(space) -> str:
    if isinstance(space, spaces.Discrete):
        return f"`Discrete({space.n})`" + (f", starting at {space.start}" if space.start else "")
    if isinstance(space, spaces.MultiDiscrete):
        return f"`MultiDiscrete({space.nvec.tolist()})`"
    if isinstance(space, spaces.Box):
        low, high = np.unique(space.low), np.unique(space.high)
        bounds = f"[{low[0]:g}, {high[0]:g}]" if low.size == high.size == 1 else "per entry, below"
        return f"`Box` of shape `{space.shape}`, `{space.dtype}`, bounds {bounds}"
    return f"`{space}`"


def observation_table(space, entries: Entries | None) -> list[str]:
    if entries is None or not isinstance(space, spaces.Box) or space.shape != (len(entries.observation),):
        return []
    rows = ["| entry | meaning | low | high |", "|---|---|---|---|"]
    for index, meaning in enumerate(entries.observation):
        rows.append(f"| {index} | {meaning} | {space.low[index]:g} | {space.high[index]:g} |")
    return rows + [""]


def params_table(spec) -> list[str]:
    if spec.params is None:
        return ["The env has no params.", ""]
    rows = ["| param | type | default | per env |", "|---|---|---|---|"]
    for field in dataclasses.fields(spec.params):
        value = getattr(spec.params, field.name)
        shown = f"array {value.shape}" if isinstance(value, np.ndarray) else f"`{value!r}`"
        kind = field.type if isinstance(field.type, str) else field.type.__name__
        per_env = "yes" if field.name in spec.per_env_params else ""
        rows.append(f"| `{field.name}` | `{kind}` | {shown} | {per_env} |")
    return rows + [""]


def version_note(spec) -> str:
    if spec.id.startswith("MinAtar-"):
        return (
            "MinAtar's v1 ids take the game's minimal action set, the v0 ids all six actions "
            "(n, l, u, r, d, f), as the original MinAtar; the dynamics are the same."
        )
    if spec.id in ENTRIES:
        return f"The dynamics of gymnasium's {spec.id}, bit for bit against kernelgym's reference."
    return "The first version of this env."


def page(spec) -> str:
    resolved = spec.resolve()
    entries = ENTRIES.get(spec.id)
    module = spec_module(spec)
    limit = resolved.max_episode_steps
    lines = [
        f"# {spec.id}",
        "",
        "<!-- generated by tools/gen_env_pages.py from the env's EnvSpec: do not edit -->",
        "",
        spec.description,
        "",
        "| | |",
        "|---|---|",
        f'| make | `kge.make("{spec.id}", num_envs=N)`, gymnasium: `"kernelgym/{spec.id}"` |',
        f"| distribution | `{spec.distribution}` (module `{module.__name__}`) |",
        f"| observation space | {describe_space(resolved.observation_space)} |",
        f"| action space | {describe_space(resolved.action_space)} |",
        f"| agents | {resolved.num_agents} (one thread per {spec.kernel_layout}) |",
        f"| truncation | {'after ' + str(limit) + ' steps' if limit else 'never'} |",
        f"| precisions | {', '.join(spec.precisions) if spec.precisions else 'as written (no choice)'} |",
        "",
    ]
    if entries is not None:
        lines += ["## Observation", ""] + observation_table(resolved.observation_space, entries)
        lines += ["## Actions", "", "| action | meaning |", "|---|---|"]
        lines += [f"| {index} | {meaning} |" for index, meaning in enumerate(entries.actions)] + [""]
        lines += [
            "## Reward",
            "",
            entries.reward,
            "",
            "## Termination",
            "",
            f"Terminated when {entries.termination}.",
            "",
        ]
    lines += ["## Rules", "", inspect.cleandoc(module.__doc__ or "").strip(), ""]
    lines += [
        "## Params",
        "",
        "`make(..., field=value)` overrides a default; a field marked *per env* may",
        "differ from env to env (`make(..., field=array)`, `set_params`, `randomize=`).",
        "",
    ]
    lines += params_table(spec)
    lines += ["## Version notes", "", version_note(spec), ""]
    return "\n".join(lines)


def built_in_specs():
    import kernelgym.envs as kge
    from kernelgym.envs.registry import get_spec

    specs = [get_spec(env_id) for env_id in kge.list_envs()]
    found = {spec.distribution for spec in specs}
    missing = sorted(set(BUILT_IN) - found)
    if missing:
        raise SystemExit(f"gen_env_pages: install {missing} first: their envs are built in and get pages")
    return [spec for spec in specs if spec.distribution in BUILT_IN]


def index(specs) -> str:
    lines = [
        "# Built-in envs",
        "",
        "<!-- generated by tools/gen_env_pages.py: do not edit -->",
        "",
        "| env | agents | actions | description |",
        "|---|---|---|---|",
    ]
    for spec in specs:
        resolved = spec.resolve()
        lines.append(
            f"| [{spec.id}]({spec.id}.md) | {resolved.num_agents} | "
            f"{describe_space(resolved.action_space)} | {spec.description} |"
        )
    return "\n".join(lines) + "\n"


def expected_pages() -> dict[Path, str]:
    specs = built_in_specs()
    pages = {PAGES / f"{spec.id}.md": page(spec) for spec in specs}
    pages[PAGES / "index.md"] = index(specs)
    return pages


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page is stale")
    check = parser.parse_args(argv).check
    pages = expected_pages()
    stale = sorted(str(p.relative_to(ROOT)) for p, text in pages.items() if not p.exists() or p.read_text() != text)
    extra = sorted(str(p.relative_to(ROOT)) for p in PAGES.glob("*.md") if p not in pages)
    if check:
        if stale or extra:
            print(f"stale: {stale}; not an env any more: {extra}; run python tools/gen_env_pages.py", file=sys.stderr)
            return 1
        return 0
    PAGES.mkdir(parents=True, exist_ok=True)
    for path in extra:
        (ROOT / path).unlink()
    for path, text in pages.items():
        path.write_text(text)
    print(f"wrote {len(stale)} page(s), removed {len(extra)} in {PAGES.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
