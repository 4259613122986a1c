"""`kernelgym bench`: env-steps/s of a kernelgym env beside gymnasium's vector env.

Both sides step the same number of envs with random actions drawn before the clock
starts (a few batches, cycled), after one untimed repeat that compiles the kernels.
A repeat times ``steps`` calls to ``step``; the table reports the min, median and max
over repeats and the machine's load average at the start and the end, and warns when the
spread (max / min) exceeds `SPREAD_WARNING`: on a shared machine, other work can change a
rate several-fold. On the cuda backend the clock stops only after the device finished.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import time
from collections.abc import Callable

import gymnasium
import torch
from rich.console import Console
from rich.table import Table
from tqdm import tqdm

import kernelgym.envs as kge
from kernelgym.core import cpu_threads

__all__ = [
    "Bench",
    "Rates",
    "SPREAD_WARNING",
    "Throughput",
    "bench_env",
    "gymnasium_counterpart",
    "print_throughput_table",
]

ACTION_BATCHES = 4  # distinct random action batches cycled through while timing
SPREAD_WARNING = 1.5  # max / min over repeats above which the table warns


@dataclasses.dataclass(frozen=True)
class Rates:
    """env-steps/s over the timed repeats: min, median and max."""

    min: float
    median: float
    max: float

    @classmethod
    def of(cls, steps: int, seconds: list[float]) -> Rates:
        rates = [steps / second for second in seconds]
        return cls(min(rates), statistics.median(rates), max(rates))

    @property
    def spread(self) -> float:
        """max / min (1.0 when every repeat ran at the same rate)."""
        return self.max / self.min

    def __str__(self) -> str:
        return f"{self.median:,.0f} ({self.min:,.0f}-{self.max:,.0f})"


@dataclasses.dataclass(frozen=True)
class Throughput:
    """env-steps/s at one ``num_envs`` (``gymnasium_*`` None without a counterpart;
    ``team_share``: the share of adaptive cpu launches that ran numba's thread team, None
    when none ran)."""

    num_envs: int
    kernelgym: Rates
    gymnasium: Rates | None = None
    gymnasium_vector_env: str | None = None
    team_share: float | None = None

    @property
    def kernelgym_steps_per_s(self) -> float:
        """kernelgym's median env-steps/s."""
        return self.kernelgym.median

    @property
    def gymnasium_steps_per_s(self) -> float | None:
        """gymnasium's median env-steps/s (None without a counterpart)."""
        return None if self.gymnasium is None else self.gymnasium.median

    @property
    def ratio(self) -> float | None:
        """kernelgym's median steps/s over gymnasium's."""
        if not self.gymnasium_steps_per_s:
            return None
        return self.kernelgym_steps_per_s / self.gymnasium_steps_per_s

    @property
    def spread(self) -> float:
        """The larger max / min of the two sides."""
        return max(rates.spread for rates in (self.kernelgym, self.gymnasium) if rates is not None)


@dataclasses.dataclass(frozen=True)
class Bench:
    """One `bench_env` run: its rows, the 1-minute load average at its start and end, and
    on the cpu backend the threading strategy that ran (`kernelgym.core.cpu_threads.describe`)."""

    rows: list[Throughput]
    load_at_start: float
    load_at_end: float
    cpu_threads: str | None = None


def gymnasium_counterpart(env_id: str) -> str | None:
    """``env_id`` when gymnasium registers an env of that id itself (not kernelgym's copy)."""
    spec = gymnasium.envs.registry.get(env_id)
    return env_id if spec is not None and spec.namespace != "kernelgym" else None


def make_gymnasium_vector_env(env_id: str, num_envs: int):
    """gymnasium's own vector env for ``env_id`` (e.g. CartPoleVectorEnv), else a SyncVectorEnv."""
    has_vector_env = gymnasium.envs.registry[env_id].vector_entry_point is not None
    mode = "vector_entry_point" if has_vector_env else "sync"
    return gymnasium.make_vec(env_id, num_envs=num_envs, vectorization_mode=mode)


def time_repeats(
    step: Callable, actions: list, steps: int, repeats: int, finish: Callable, progress: tqdm
) -> list[float]:
    """Seconds per repeat of ``steps`` calls ``step(action)``, after one untimed repeat.

    The untimed repeat compiles what compiles lazily (first step, first auto-reset).
    """
    seconds = []
    for repeat in range(repeats + 1):
        start = time.perf_counter()
        for i in range(steps):
            step(actions[i % len(actions)])
        finish()
        if repeat:
            seconds.append(time.perf_counter() - start)
            progress.update(1)
    return seconds


def measure_kernelgym(
    env_id: str, num_envs: int, backend: str, steps: int, repeats: int, progress: tqdm
) -> tuple[Rates, float | None]:
    """env-steps/s of ``kernelgym.envs.make(env_id)`` over ``repeats``, and the share of its
    adaptive cpu launches that ran the thread team (None when it ran none)."""
    serial_before, team_before = cpu_threads.adaptive_counts()
    env = kge.make(env_id, num_envs=num_envs, backend=backend, seed=0)
    try:
        env.reset(seed=0)
        env.action_space.seed(0)
        actions = [torch.as_tensor(env.action_space.sample(), device=env.device) for _ in range(ACTION_BATCHES)]
        on_gpu = env.device.type == "cuda"
        finish = (lambda: torch.cuda.synchronize(env.device)) if on_gpu else (lambda: None)
        seconds = time_repeats(env.step, actions, steps, repeats, finish, progress)
    finally:
        env.close()
    serial, team = (now - before for now, before in zip(cpu_threads.adaptive_counts(), (serial_before, team_before)))
    return Rates.of(num_envs * steps, seconds), (team / (serial + team) if serial + team else None)


def measure_gymnasium(env_id: str, num_envs: int, steps: int, repeats: int, progress: tqdm) -> tuple[Rates, str]:
    """env-steps/s of gymnasium's vector env over ``repeats``, and that vector env's class name."""
    env = make_gymnasium_vector_env(env_id, num_envs)
    try:
        env.reset(seed=0)
        env.action_space.seed(0)
        actions = [env.action_space.sample() for _ in range(ACTION_BATCHES)]
        seconds = time_repeats(env.step, actions, steps, repeats, lambda: None, progress)
        name = type(env.unwrapped).__name__
    finally:
        env.close()
    return Rates.of(num_envs * steps, seconds), name


def load_average() -> float:
    """The machine's 1-minute load average (runnable processes; compare with the core count)."""
    return os.getloadavg()[0]


def bench_env(
    env_id: str,
    num_envs: list[int],
    backend: str,
    steps: int = 200,
    repeats: int = 3,
    with_gymnasium: bool = True,
    progress: bool = True,
) -> Bench:
    """Measure ``env_id`` at every ``num_envs`` (and gymnasium's counterpart, if any).

    Parameters
    ----------
    env_id : str
        A registered kernelgym env id.
    num_envs : list of int
    backend : str
        A concrete kernelgym backend (``"cuda"``, ``"cpu"`` or ``"sim"``).
    steps, repeats : int
        Calls to ``step`` per timed repeat, and timed repeats (min, median and max are kept).
    with_gymnasium : bool
        Also measure gymnasium's vector env when gymnasium has ``env_id``.
    progress : bool
        Show a tqdm bar (one tick per timed repeat).
    """
    load_at_start = load_average()
    counterpart = gymnasium_counterpart(env_id) if with_gymnasium else None
    total = len(num_envs) * repeats * (2 if counterpart else 1)
    rows = []
    with tqdm(total=total, unit="repeat", desc=f"bench {env_id}", disable=not progress) as bar:
        for n in num_envs:
            bar.set_postfix(num_envs=n, side="kernelgym")
            ours, team_share = measure_kernelgym(env_id, n, backend, steps, repeats, bar)
            theirs, name = None, None
            if counterpart:
                bar.set_postfix(num_envs=n, side="gymnasium")
                theirs, name = measure_gymnasium(counterpart, n, steps, repeats, bar)
            rows.append(Throughput(n, ours, theirs, name, team_share))
    return Bench(rows, load_at_start, load_average(), cpu_threads.describe() if backend == "cpu" else None)


def print_throughput_table(env_id: str, backend: str, bench: Bench, console: Console | None = None) -> None:
    """Print median (min-max) env-steps/s and ratios as a table, the load, and a warning on a large spread."""
    console = console or Console(width=200)
    table = Table(title=f"{env_id}: env-steps/s, median (min-max) over repeats, kernelgym backend {backend}")
    for column in ("num_envs", f"kernelgym ({backend})", "gymnasium", "ratio"):
        table.add_column(column, justify="right")
    for row in bench.rows:
        theirs = "n/a" if row.gymnasium is None else f"{row.gymnasium} ({row.gymnasium_vector_env})"
        ratio = "n/a" if row.ratio is None else f"{row.ratio:.1f}x"
        table.add_row(f"{row.num_envs:,}", str(row.kernelgym), theirs, ratio)
    console.print(table)
    if bench.cpu_threads is not None:
        shares = ", ".join(
            f"{row.team_share:.0%} at {row.num_envs:,} envs" for row in bench.rows if row.team_share is not None
        )
        console.print(
            f"cpu threads: {bench.cpu_threads}"
            + (f"; the thread team ran {shares} of the launches" if shares else "")
            + f" (override: {cpu_threads.CPU_THREADS_ENV_VAR}=adaptive|all|one)"
        )
    console.print(
        f"load average (1 min) at start {bench.load_at_start:.2f}, at end {bench.load_at_end:.2f}, "
        f"on {os.cpu_count()} cores"
    )
    spread = [row for row in bench.rows if row.spread > SPREAD_WARNING]
    if spread:
        worst = max(spread, key=lambda row: row.spread)
        console.print(
            f"WARNING: the rates vary up to {worst.spread:.1f}x between repeats (num_envs={worst.num_envs:,}; "
            f"more than {SPREAD_WARNING}x): the machine was busy; compare medians with care, or use "
            f"more --repeats on an idle machine",
            style="bold yellow",
        )
