"""Rollout throughput on CartPole: the multi-actor pool, gymnasium's AsyncVectorEnv and
the DeviceCollector, side by side in one run.

All three drive the same small MLP actor (4-32-2, greedy) through fragments of
``--n-steps`` steps of CartPole-v1:

- pool: ``kernelgym.collectors.rollout.pool.rollout`` with ``--n-actors`` worker
  processes, each stepping ONE kernelgym CPU vector env of ``--n-per-actor`` envs;
- pool, list: the same pool over lists of gymnasium CartPole-v1 envs (the seed's path);
- AsyncVectorEnv: gymnasium's AsyncVectorEnv over ``--async-envs`` CartPole-v1
  processes, the actor run by the learner on every step;
- DeviceCollector: one kernelgym CPU vector env of ``--device-envs`` envs.

    .venv/bin/python benchmarks/bench_rollouts.py

Writes benchmarks/results/rollouts.md and prints it. Every number is the median of
``--repeats`` timed windows after a warm-up (process start and compilation excluded).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import os
import platform
import statistics
import time
from pathlib import Path

import gymnasium as gym
import torch

from kernelgym.collectors.device_collector import DeviceCollector
from kernelgym.collectors.rollout import Actor, pool


class MLPActor(Actor):
    """A small greedy policy: CartPole observation -> 32 tanh units -> 2 logits."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.Tanh(), torch.nn.Linear(32, 2))

    def step(self, stepno, obs, act, rew, fin, *, hx=None, virtual=False):
        return self.net(obs).argmax(-1), (), {}


class KernelCartPoles:
    """``factory(seed=...)`` of one kernelgym CPU vector env; ``threads`` caps numba's
    threads (1 in pool workers: the pool already runs one worker per core)."""

    def __init__(self, num_envs: int, threads: int | None = None):
        self.num_envs, self.threads = num_envs, threads

    def __call__(self, seed=None):
        import numba

        import kernelgym.envs as kge

        if self.threads is not None:
            numba.set_num_threads(self.threads)
            torch.set_num_threads(self.threads)
        return kge.make("CartPole-v1", num_envs=self.num_envs, backend="cpu", seed=seed, autoreset_mode="same_step")


def gym_cartpole(seed=None):
    return gym.make("CartPole-v1")


def timed_windows(advance, repeats: int) -> list[float]:
    """Seconds-per-window of ``advance()`` (which collects one window of steps)."""
    advance()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        advance()
        times.append(time.perf_counter() - start)
    return times


def bench_pool(factory, n_actors, n_per_actor, n_steps, windows_batches, repeats):
    batches = pool.rollout(
        factory,
        MLPActor(),
        n_steps,
        n_actors=n_actors,
        n_per_actor=n_per_actor,
        n_buffers=2 * n_actors,
        n_per_batch=n_actors,
        timeout=120,
        entropy=0,
    )
    try:
        next(batches)
        times = timed_windows(lambda: [next(batches) for _ in range(windows_batches)], repeats)
    finally:
        batches.close()
    return n_steps * n_actors * n_per_actor * windows_batches, times


def bench_async(n_envs, n_steps, windows_fragments, repeats):
    envs = gym.vector.AsyncVectorEnv([gym_cartpole] * n_envs, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    actor = MLPActor()
    obs, _ = envs.reset(seed=0)

    def advance():
        nonlocal obs
        for _ in range(windows_fragments * n_steps):
            with torch.no_grad():
                act = actor.net(torch.from_numpy(obs)).argmax(-1).numpy()
            obs, *_ = envs.step(act)

    try:
        times = timed_windows(advance, repeats)
    finally:
        envs.close()
    return n_steps * n_envs * windows_fragments, times


def bench_device(n_envs, threads, n_steps, windows_fragments, repeats):
    collector = DeviceCollector(KernelCartPoles(n_envs, threads)(seed=0), MLPActor(), n_steps, seed=0)
    times = timed_windows(lambda: [collector.collect() for _ in range(windows_fragments)], repeats)
    return n_steps * n_envs * windows_fragments, times


def versions() -> str:
    names = ["torch", "numpy", "numba", "gymnasium", "kernelgym-collectors", "kernelgym-envs"]
    found = []
    for name in names:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} (not installed)")
    return ", ".join(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-steps", type=int, default=64, help="steps per fragment")
    parser.add_argument("--n-actors", type=int, default=2, help="pool worker processes")
    parser.add_argument("--n-per-actor", type=int, default=4096, help="envs per pool worker")
    parser.add_argument("--list-per-actor", type=int, default=8, help="gymnasium envs per worker, list path")
    parser.add_argument("--async-envs", type=int, default=8, help="AsyncVectorEnv sub-processes")
    parser.add_argument("--device-envs", type=int, default=16384, help="DeviceCollector envs")
    parser.add_argument(
        "--device-threads", type=int, default=1, help="numba and torch threads of the DeviceCollector's process"
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output", type=Path, default=Path(__file__).parent / "results" / "rollouts.md")
    args = parser.parse_args()

    load_before = os.getloadavg()
    rows = []
    runs = [
        (
            "pool, kernelgym vector env per worker",
            f"{args.n_actors} workers x {args.n_per_actor}",
            lambda: bench_pool(
                KernelCartPoles(args.n_per_actor, threads=1),
                args.n_actors,
                args.n_per_actor,
                args.n_steps,
                4,
                args.repeats,
            ),
        ),
        (
            "pool, list of gymnasium envs per worker",
            f"{args.n_actors} workers x {args.list_per_actor}",
            lambda: bench_pool(gym_cartpole, args.n_actors, args.list_per_actor, args.n_steps, 8, args.repeats),
        ),
        (
            "gymnasium AsyncVectorEnv",
            f"{args.async_envs} processes x 1",
            lambda: bench_async(args.async_envs, args.n_steps, 8, args.repeats),
        ),
        (
            "DeviceCollector (cpu backend)",
            f"1 process ({args.device_threads} thread(s)) x {args.device_envs}",
            lambda: bench_device(args.device_envs, args.device_threads, args.n_steps, 4, args.repeats),
        ),
    ]
    for name, layout, run in runs:
        steps, times = run()
        rates = [steps / t for t in times]
        rows.append((name, layout, steps, statistics.median(rates), min(rates), max(rates)))
        print(f"{name}: {statistics.median(rates):,.0f} steps/s", flush=True)
    baseline = next(row[3] for row in rows if row[0].startswith("gymnasium"))

    lines = [
        "## Rollouts (CartPole-v1, MLP 4-32-2 actor)",
        "",
        f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()},"
        f" Python {platform.python_version()}; load average before/after: "
        f"{load_before[0]:.1f} / {os.getloadavg()[0]:.1f} (a shared machine: other jobs ran too)",
        f"- versions: {versions()}",
        f"- command: `.venv/bin/python benchmarks/bench_rollouts.py` (fragments of {args.n_steps} steps,"
        f" median of {args.repeats} windows after a warm-up)",
        "",
        "| method | layout | steps per window | median steps/s | min - max | vs AsyncVectorEnv |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for name, layout, steps, median, low, high in rows:
        lines.append(
            f"| {name} | {layout} | {steps:,} | {median:,.0f} | {low:,.0f} - {high:,.0f} | {median / baseline:.1f}x |"
        )
    text = "\n".join(lines) + "\n"
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
