"""The PNGs the command writes: the demo's learning curve and bench's throughput.

matplotlib's object-oriented `Figure` renders with the Agg canvas: no display and
no pyplot state are needed.
"""

from __future__ import annotations

from matplotlib.figure import Figure

__all__ = ["plot_learning_curve", "plot_throughput"]


def plot_learning_curve(result, path: str) -> None:
    """Mean episode return against env steps (and wall time on a top axis) as a PNG.

    Parameters
    ----------
    result : kernelgym.cli.ppo.TrainResult
    path : str
        Where to write the PNG.
    """
    figure = Figure(figsize=(7, 4.5), layout="constrained")
    axes = figure.add_subplot()
    axes.plot(result.env_steps, result.mean_returns, color="tab:blue", label="mean return (last 100 episodes)")
    axes.axhline(
        result.config.target_return, color="tab:green", linestyle="--", label=f"target {result.config.target_return:g}"
    )
    axes.set_xlabel("env steps")
    axes.set_ylabel("mean episode return")
    axes.set_title(
        f"PPO on {result.config.env_id} ({result.backend}, seed {result.config.seed}): "
        f"{result.final_return:.0f} after {result.wall_time_s:.1f} s"
    )
    axes.grid(alpha=0.3)
    axes.legend(loc="lower right")
    figure.savefig(path, dpi=100)


def plot_throughput(env_id: str, backend: str, rows, path: str) -> Figure:
    """env-steps/s for kernelgym and gymnasium as a PNG, median with min-max error bars.

    Several ``num_envs``: a log-log line plot against num_envs. One ``num_envs``: a bar
    chart (a line through one point says nothing).

    Parameters
    ----------
    env_id, backend : str
    rows : list of kernelgym.cli.throughput.Throughput
    path : str
        Where to write the PNG.

    Returns
    -------
    matplotlib.figure.Figure
        The figure written.
    """
    figure = Figure(figsize=(7, 4.5), layout="constrained")
    axes = figure.add_subplot()
    sides = [(f"kernelgym ({backend})", [(row.num_envs, row.kernelgym) for row in rows])]
    measured = [row for row in rows if row.gymnasium is not None]
    if measured:
        sides.append(
            (f"gymnasium ({measured[0].gymnasium_vector_env})", [(row.num_envs, row.gymnasium) for row in measured])
        )
    if len(rows) == 1:
        _bars(axes, sides)
        axes.set_title(f"{env_id} throughput at num_envs={rows[0].num_envs:,}")
    else:
        for (label, points), marker in zip(sides, "os"):
            num_envs = [n for n, _ in points]
            medians = [rates.median for _, rates in points]
            errors = [
                [rates.median - rates.min for _, rates in points],
                [rates.max - rates.median for _, rates in points],
            ]
            axes.errorbar(num_envs, medians, yerr=errors, marker=marker, capsize=3, label=label)
        axes.set_xscale("log")
        axes.set_xlabel("num_envs")
        axes.set_title(f"{env_id} throughput")
        axes.legend()
    axes.set_yscale("log")
    axes.set_ylabel("env-steps/s (median, min-max)")
    axes.grid(alpha=0.3, which="both")
    figure.savefig(path, dpi=100)
    return figure


def _bars(axes, sides) -> None:
    """One labelled bar per side, with its min-max range and its median written on it."""
    labels = [label for label, _ in sides]
    rates = [points[0][1] for _, points in sides]
    positions = range(len(sides))
    errors = [[r.median - r.min for r in rates], [r.max - r.median for r in rates]]
    bars = axes.bar(
        positions, [r.median for r in rates], yerr=errors, capsize=6, color=["tab:blue", "tab:orange"][: len(sides)]
    )
    axes.bar_label(bars, labels=[f"{r.median:,.0f}" for r in rates], label_type="center", color="white")
    axes.set_xticks(list(positions), labels)
