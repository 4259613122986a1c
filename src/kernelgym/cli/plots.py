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
    axes.axhline(result.config.target_return, color="tab:green", linestyle="--",
                 label=f"target {result.config.target_return:g}")
    axes.set_xlabel("env steps")
    axes.set_ylabel("mean episode return")
    axes.set_title(f"PPO on {result.config.env_id} ({result.backend}, seed {result.config.seed}): "
                   f"{result.final_return:.0f} after {result.wall_time_s:.1f} s")
    axes.grid(alpha=0.3)
    axes.legend(loc="lower right")
    figure.savefig(path, dpi=100)


def plot_throughput(env_id: str, backend: str, rows, path: str) -> None:
    """Median env-steps/s against num_envs (log-log) for kernelgym and gymnasium, as a PNG.

    Parameters
    ----------
    env_id, backend : str
    rows : list of kernelgym.cli.throughput.Throughput
    path : str
        Where to write the PNG.
    """
    figure = Figure(figsize=(7, 4.5), layout="constrained")
    axes = figure.add_subplot()
    num_envs = [row.num_envs for row in rows]
    axes.plot(num_envs, [row.kernelgym_steps_per_s for row in rows], marker="o", label=f"kernelgym ({backend})")
    measured = [row for row in rows if row.gymnasium_steps_per_s is not None]
    if measured:
        axes.plot([row.num_envs for row in measured], [row.gymnasium_steps_per_s for row in measured],
                  marker="s", label=f"gymnasium ({measured[0].gymnasium_vector_env})")
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("num_envs")
    axes.set_ylabel("env-steps/s (median)")
    axes.set_title(f"{env_id} throughput")
    axes.grid(alpha=0.3, which="both")
    axes.legend()
    figure.savefig(path, dpi=100)
