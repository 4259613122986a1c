"""The cost of per-env params (issue 24): CartPole env-steps/s with its physics params as
compile-time constants against the per-env table, and the host time of ``set_params``.

At each N, round after round (so load changes hit both alike), the composed step launch
(``env._launch_step``, what ``step()`` runs after its action checks) of:

- ``constants``: CartPole-v1 with ``per_env_params=()`` (every param a constant of the
  launcher, as before issue 24);
- ``per-env table``: CartPole-v1 as registered (gravity, masses, length, force, tau and
  the reset bound read from the ``(F, N)`` table at each step; every row's envs agree,
  so each row has stride 0: one cached entry);
- ``length per env``: the same made with ``length=np.linspace(0.4, 0.6, N)`` (the length
  row read per env, stride 1);
- ``randomize length``: the same made with ``randomize={"length": (0.4, 0.6)}`` (the
  length row read per env, and a draw in the reset branch).

Then ``set_params(length=array)`` host time (median of 2000 calls, wall time) at each N.
Rates are per second of the process's CPU time (run it with ``NUMBA_NUM_THREADS=1``, so
they are one core's); medians of ``--repeats`` rounds; writes
benchmarks/results/per_env_params.md.

    NUMBA_NUM_THREADS=1 .venv/bin/python benchmarks/bench_per_env_params.py
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import platform
import statistics
import time
from pathlib import Path

import numba
import numpy as np

import kernelgym.envs as kge
from kernelgym.envs.runtime.vector_env import KernelVectorEnv

SIZES = (4_096, 1_048_576)
RESULTS = Path(__file__).resolve().parent / "results" / "per_env_params.md"


def _envs(n: int) -> dict:
    spec = kge.get_spec("CartPole-v1")
    envs = {
        "constants": KernelVectorEnv(dataclasses.replace(spec, per_env_params=()), n, backend="cpu", seed=0),
        "per-env table": KernelVectorEnv(spec, n, backend="cpu", seed=0),
        "length per env": KernelVectorEnv(spec, n, backend="cpu", seed=0, length=np.linspace(0.4, 0.6, n)),
        "randomize length": KernelVectorEnv(spec, n, backend="cpu", seed=0, randomize={"length": (0.4, 0.6)}),
    }
    actions = np.random.default_rng(0).integers(0, 2, n).astype(np.int64)
    for env in envs.values():
        env.reset(seed=0)
        env.step(actions)  # compile and warm up
    return envs, actions


def _rate(env, actions, steps: int) -> float:
    """Env-steps per second of the process's CPU time: on a shared, oversubscribed machine the
    time this process was descheduled would swamp differences of a few percent in wall time."""
    launch = env._launch_step
    start = time.process_time()
    for _ in range(steps):
        launch(actions)
    return env.num_envs * steps / (time.process_time() - start)


def _set_params_seconds(env, calls: int = 2000) -> float:
    lengths = np.linspace(0.4, 0.6, env.num_envs)
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        env.set_params(length=lengths)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=41)
    args = parser.parse_args()
    threads = numba.get_num_threads()
    machine = (
        f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%dT%H:%M} UTC; machine: "
        f"{platform.machine()}, {os.cpu_count()} cores, numba threads {threads}; load average at start "
        f"{tuple(round(x, 2) for x in os.getloadavg())}"
    )
    method = (
        f"- CartPole-v1, cpu backend, the composed step launch with random actions, env-steps per second of "
        f"process CPU time; {args.repeats} rounds, each timing every variant back to back in a rotating order; "
        "rates are medians (min-max), costs the median of each round's ratio to the constants (a change of the "
        "machine's speed between rounds cancels)"
    )
    header = (
        "| N | constants (env-steps/s) | per-env table | cost | length per env | cost | randomize length | cost "
        "| set_params host time |"
    )
    lines = [
        "## Per-env params against compile-time constants (benchmarks/bench_per_env_params.py)",
        "",
        machine,
        method,
        "",
        header,
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for n in SIZES:
        envs, actions = _envs(n)
        names = list(envs)
        steps = max(3, 400_000 // n)
        rates = {name: [] for name in names}
        for round_index in range(args.repeats):
            order = names[round_index % len(names) :] + names[: round_index % len(names)]
            for name in order:
                rates[name].append(_rate(envs[name], actions, steps))
        median = {name: statistics.median(values) for name, values in rates.items()}
        spread = {name: f"({min(v) / 1e6:.1f}-{max(v) / 1e6:.1f})" for name, v in rates.items()}
        cost = {name: 1.0 - statistics.median(np.array(rates[name]) / np.array(rates["constants"])) for name in names}
        host = _set_params_seconds(envs["per-env table"], 2000 if n <= 65_536 else 50)
        lines.append(
            f"| {n:,} | {median['constants'] / 1e6:.1f} M {spread['constants']} | "
            + "".join(f"{median[name] / 1e6:.1f} M {spread[name]} | {cost[name]:+.1%} | " for name in names[1:])
            + f"{host * 1e6:,.0f} us |"
        )
        print(lines[-1], flush=True)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
