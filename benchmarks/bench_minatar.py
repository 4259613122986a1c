"""MinAtar env-steps per second: kernelgym (cpu backend) against the original ``minatar`` package.

One interleaved run: every round times, for every game, the original (one env, Python,
random actions, its observation built every step, reset at each terminal) and kernelgym ``make("MinAtar-<Game>-v1", N,
backend="cpu")`` at each N (random actions pre-made, handed in as numpy arrays, NEXT_STEP
autoreset). Each number is the median over the rounds, after a warm-up. Also reports the
bytes each env step reads and writes at least (state, observation, action, reward and
flags), and the machine's measured copy bandwidth, to set the cpu rates against it.
Writes benchmarks/results/minatar.md and prints it.

    python benchmarks/bench_minatar.py [--sizes 1 64 4096 65536] [--rounds 3]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results" / "minatar.md"
GAMES = {
    "Asterix": "asterix",
    "Breakout": "breakout",
    "Freeway": "freeway",
    "Seaquest": "seaquest",
    "SpaceInvaders": "space_invaders",
}
ACTION_BATCHES = 8


def copy_bandwidth(megabytes: int = 256, repeats: int = 5) -> float:
    """Bytes per second moved by a large numpy copy (read + write), the best of ``repeats``."""
    source = np.ones(megabytes * 2**20, np.uint8)
    target = np.empty_like(source)
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(target, source)
        best = max(best, 2 * source.nbytes / (time.perf_counter() - start))
    return best


def time_original(module: str, seconds: float) -> float:
    from minatar import Environment

    env = Environment(module)
    env.seed(0)
    actions = np.random.default_rng(0).integers(0, 6, 4096)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for action in actions[:256]:
            _, terminal = env.act(int(action))
            env.state()  # the observation, as its gymnasium wrapper returns every step
            if terminal:
                env.reset()
        steps += 256
    return steps / (time.perf_counter() - start)


class KernelRun:
    """A made env stepped with pre-made random actions."""

    def __init__(self, game: str, num_envs: int):
        import kernelgym.envs as kge

        self.env = kge.make(f"MinAtar-{game}-v1", num_envs, backend="cpu", seed=0)
        self.env.reset(seed=0)
        count = self.env.single_action_space.n
        self.actions = [np.random.default_rng(k).integers(0, count, num_envs) for k in range(ACTION_BATCHES)]
        self.num_envs = num_envs
        self.step_bytes = self._bytes_per_env_step()

    def _bytes_per_env_step(self) -> int:
        # every state array is read and may be written; obs written; action read; reward,
        # terminated, truncated written (a lower bound: caches may hold more or less)
        state = sum(array.nbytes for array in self.env.get_state().values()) // self.num_envs
        obs = int(np.prod(self.env.single_observation_space.shape))
        return 2 * state + obs + 8 + 4 + 2

    def rate(self, seconds: float) -> float:
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            for k in range(ACTION_BATCHES):
                self.env.step(self.actions[k])
            steps += ACTION_BATCHES
        return steps * self.num_envs / (time.perf_counter() - start)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 64, 4096, 65536])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=1.0, help="per timed measurement")
    parser.add_argument("--games", nargs="+", default=list(GAMES))
    args = parser.parse_args(argv)
    runs = {(game, n): KernelRun(game, n) for game in args.games for n in args.sizes}
    for run in runs.values():  # warm-up: compile and touch every buffer
        run.rate(0.05)
    rates = {key: [] for key in [*runs, *((game, "original") for game in args.games)]}
    for _ in range(args.rounds):
        for game in args.games:
            rates[(game, "original")].append(time_original(GAMES[game], args.seconds))
            for n in args.sizes:
                rates[(game, n)].append(runs[(game, n)].rate(args.seconds))
    bandwidth = copy_bandwidth()
    lines = [
        f"# MinAtar env-steps/s, cpu ({datetime.date.today()}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cpus, numba threads {os.environ.get('NUMBA_NUM_THREADS', 'default')})",
        "",
        f"Median of {args.rounds} interleaved rounds of {args.seconds:g} s each. Original: minatar 1.0.15, one env, "
        'Python. kernelgym: `make(..., backend="cpu")`, random actions, NEXT_STEP autoreset. Bytes/step: state '
        "read and written, observation, action, reward and flags, per env step (a lower bound). Measured copy "
        f"bandwidth (numpy, read + write): {bandwidth / 1e9:.1f} GB/s.",
        "",
        "| game | original (1 env) | "
        + " | ".join(f"N = {n:,}" for n in args.sizes)
        + " | bytes/step | GB/s at the largest N | x original at the largest N |",
        "|---|---|" + "---|" * len(args.sizes) + "---|---|---|",
    ]
    for game in args.games:
        original = statistics.median(rates[(game, "original")])
        medians = [statistics.median(rates[(game, n)]) for n in args.sizes]
        step_bytes = runs[(game, args.sizes[-1])].step_bytes
        lines.append(
            f"| {game} | {original:,.0f} | "
            + " | ".join(f"{rate:,.0f}" for rate in medians)
            + f" | {step_bytes:,} | {medians[-1] * step_bytes / 1e9:.2f} | {medians[-1] / original:,.0f} |"
        )
    text = "\n".join(lines) + "\n"
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
