"""MinAtar env-steps per second: kernelgym (cpu backend) against the original ``minatar`` package and gymnax.

One interleaved run: every round times, for every game, the original (one env, Python,
random actions, its observation built every step, reset at each terminal) and kernelgym ``make("MinAtar-<Game>-v1", N,
backend="cpu")`` at each N (random actions pre-made, handed in as numpy arrays, NEXT_STEP
autoreset), and with ``--gymnax-python`` gymnax's MinAtar ports at each N (JAX on cpu, jit of
a scan of vmapped steps; served by bench_minatar_gymnax.py in gymnax's own venv, one process
kept alive so that its cells take their turn in the same rounds). Each number is the median
over the rounds, after a warm-up (and compile). Also reports the bytes each env step reads
and writes at least (state, observation, action, reward and flags), and the machine's
measured copy bandwidth, to set the cpu rates against it.
Writes benchmarks/results/minatar.md (or ``--out``) and prints it.

    python benchmarks/bench_minatar.py [--sizes 1 64 4096 65536] [--rounds 3] \
        [--gymnax-python /tmp/venv-gymnax/bin/python]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results" / "minatar.md"
GYMNAX_SCRIPT = Path(__file__).resolve().parent / "bench_minatar_gymnax.py"
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


class GymnaxProcess:
    """gymnax's cells, timed by bench_minatar_gymnax.py run by the python of gymnax's venv.

    One process for the whole run, so that each (game, N) compiles once and its timed cells
    take their turn in the rounds. A cell that the process cannot answer (it died: for
    example killed for memory) is left out of the table, not fatal to the run.
    """

    def __init__(self, python: str):
        self.process = subprocess.Popen(
            [python, str(GYMNAX_SCRIPT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "JAX_PLATFORMS": "cpu"},
        )
        hello = self._read()
        if hello is None:
            raise RuntimeError(f"--gymnax-python {python}: the gymnax process ended at start (its error is above)")
        self.versions = hello
        self.scan_steps: dict[int, int] = {}

    def _read(self) -> dict | None:
        line = self.process.stdout.readline()
        return json.loads(line) if line else None

    def request(self, game: str, num_envs: int, seconds: float) -> float | None:
        """Env-steps/s of one timed cell (``seconds`` 0: compile and warm up only), None if the process died."""
        if self.process.poll() is not None:
            return None
        try:
            self.process.stdin.write(json.dumps({"game": game, "num_envs": num_envs, "seconds": seconds}) + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            return None
        reply = self._read()
        if reply is None:
            print(f"gymnax process ended at {game}, N = {num_envs}: its remaining cells are left out", file=sys.stderr)
            return None
        self.scan_steps[num_envs] = reply["scan_steps"]
        if "compile_s" in reply:
            print(f"gymnax {game} N = {num_envs}: compiled and warmed in {reply['compile_s']:.1f} s", file=sys.stderr)
        return reply.get("rate")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait()


def _median(values: list) -> float | None:
    values = [value for value in values if value is not None]
    return statistics.median(values) if values else None


def _cell(rate: float | None) -> str:
    return "—" if rate is None else f"{rate:,.0f}"


def _ratio(numerator: float | None, denominator: float | None, digits: int = 1) -> str:
    return "—" if numerator is None or not denominator else f"{numerator / denominator:,.{digits}f}"


def table(
    rates: dict,
    games: list[str],
    sizes: list[int],
    step_bytes: dict[str, int],
    bandwidth: float,
    rounds: int,
    seconds: float,
    gymnax: dict | None = None,
    load: tuple[float, float] | None = None,
) -> str:
    """The markdown table of medians.

    ``rates`` maps ``(game, "original")``, ``(game, N)`` (kernelgym) and, with gymnax,
    ``(game, "gymnax", N)`` to the rounds' env-steps/s (None for a cell not measured).
    ``gymnax``: its versions and ``scan_steps`` per N, or None for no gymnax columns.
    ``load``: the 1-minute load average at the start and the end of the run.
    """
    ratio_size = 4096 if 4096 in sizes else sizes[-1]
    header = (
        f"# MinAtar env-steps/s, cpu ({datetime.date.today()}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cpus, numba threads {os.environ.get('NUMBA_NUM_THREADS', 'default')})"
    )
    caption = (
        f"Median of {rounds} interleaved rounds of {seconds:g} s each. Original: minatar 1.0.15, one env, "
        'Python. kernelgym: `make(..., backend="cpu")`, random actions, NEXT_STEP autoreset. Bytes/step: state '
        "read and written, observation, action, reward and flags, per env step (a lower bound). Measured copy "
        f"bandwidth (numpy, read + write): {bandwidth / 1e9:.1f} GB/s."
    )
    if load is not None:
        # other jobs on the cores stall every parallel region's barrier (benchmarks/README.md)
        caption += f" Load average (1 min) at the start and the end: {load[0]:.1f}, {load[1]:.1f}."
    columns = ["game", "original (1 env)", *(f"N = {n:,}" for n in sizes)]
    if gymnax is not None:
        steps = ", ".join(f"{gymnax['scan_steps'][n]:,} at N = {n:,}" for n in sizes if n in gymnax["scan_steps"])
        caption += (
            f" gymnax {gymnax['gymnax']} (jax {gymnax['jax']}, cpu, in the same rounds): `jax.jit` of a "
            "`lax.scan` of T steps of `jax.vmap(env.step)`, random actions drawn inside, gymnax's auto-reset "
            f"(T = {steps}); no sticky actions and a 1,000-step time limit (Freeway 2,500), as gymnax's ports."
        )
        columns += [f"gymnax N = {n:,}" for n in sizes]
    columns += ["bytes/step", "GB/s at the largest N", "x original at the largest N"]
    if gymnax is not None:
        columns.append(f"x gymnax at N = {ratio_size:,}")
    lines = [header, "", caption, "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for game in games:
        original = _median(rates[(game, "original")])
        medians = [_median(rates[(game, n)]) for n in sizes]
        cells = [game, _cell(original), *map(_cell, medians)]
        if gymnax is not None:
            cells += [_cell(_median(rates[(game, "gymnax", n)])) for n in sizes]
        largest = medians[-1]
        cells += [
            f"{step_bytes[game]:,}",
            "—" if largest is None else f"{largest * step_bytes[game] / 1e9:.2f}",
            _ratio(largest, original, 0),
        ]
        if gymnax is not None:
            kernelgym = _median(rates[(game, ratio_size)])
            cells.append(_ratio(kernelgym, _median(rates[(game, "gymnax", ratio_size)])))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 64, 4096, 65536])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=1.0, help="per timed measurement")
    parser.add_argument("--games", nargs="+", default=list(GAMES), choices=list(GAMES))
    parser.add_argument("--out", type=Path, default=RESULTS, help="the markdown written (default: %(default)s)")
    parser.add_argument(
        "--gymnax-python",
        help="python of a venv with jax[cpu] and gymnax (benchmarks/README.md): adds gymnax's cells to the rounds",
    )
    args = parser.parse_args(argv)
    if args.gymnax_python is not None and not os.access(args.gymnax_python, os.X_OK):
        parser.error(f"--gymnax-python: expected an executable python, got {args.gymnax_python!r} (not executable)")
    if min(args.sizes) < 1:
        parser.error(f"--sizes: expected env counts >= 1, got {args.sizes}")
    load_at_start = os.getloadavg()[0]
    gymnax = GymnaxProcess(args.gymnax_python) if args.gymnax_python else None
    runs = {(game, n): KernelRun(game, n) for game in args.games for n in args.sizes}
    for run in runs.values():  # warm-up: compile and touch every buffer
        run.rate(0.05)
    rates: dict = {key: [] for key in [*runs, *((game, "original") for game in args.games)]}
    if gymnax is not None:
        for game in args.games:
            for n in args.sizes:
                gymnax.request(game, n, 0.0)  # compile and warm up
                rates[(game, "gymnax", n)] = []
    for _ in range(args.rounds):
        for game in args.games:
            rates[(game, "original")].append(time_original(GAMES[game], args.seconds))
            for n in args.sizes:
                rates[(game, n)].append(runs[(game, n)].rate(args.seconds))
            if gymnax is not None:
                for n in args.sizes:
                    rates[(game, "gymnax", n)].append(gymnax.request(game, n, args.seconds))
    if gymnax is not None:
        gymnax.close()
    bandwidth = copy_bandwidth()
    step_bytes = {game: runs[(game, args.sizes[-1])].step_bytes for game in args.games}
    gymnax_info = None if gymnax is None else {**gymnax.versions, "scan_steps": gymnax.scan_steps}
    load = (load_at_start, os.getloadavg()[0])
    text = table(rates, args.games, args.sizes, step_bytes, bandwidth, args.rounds, args.seconds, gymnax_info, load)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
