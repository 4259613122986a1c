"""CartPole env-steps per second, ``step()`` against the kernel and a plain loop, in ONE interleaved run.

At each N, round after round (so load changes hit every contender alike):

- ``step()``: kernelgym ``make("CartPole-v1", N, backend="cpu")``, int64 torch actions
  (what a torch policy hands it);
- ``step() numpy``: the same with the numpy int64 arrays the plain loops get;
- ``step() no statistics``: ``make(..., episode_statistics=False)``, numpy actions;
- ``kernel``: the default env's composed launch called directly (``env._launch_step``);
- ``plain loop + statistics`` and ``plain loop``: the hand-written numba prange loops of
  benchmarks/plain_cartpole.py, with and without the episode statistics kernelgym's
  ``info`` carries by default: the yardsticks of ``step() numpy`` and ``step() no
  statistics``, the same work with the same inputs;
- ``step() before``: ``step()`` of an older kernelgym checkout (``--base``, e.g.
  ``git worktree add ../base a1aae76``), run in a worker process fed the same rounds;
- gymnasium's numpy ``CartPoleVectorEnv``;
- gymnax (jit + vmap, a ``lax.scan`` of 100 steps) and EnvPool when installed (a note otherwise).

Also the machine's memory bandwidth (a numpy copy of 256 MiB) and the bytes one
env-step moves, so the distance to the physical limit shows. Medians and min-max
spreads of ``--repeats`` rounds; writes benchmarks/results/step.md (``run_all.py`` assembles
BENCHMARKS.md from it).

    .venv/bin/python benchmarks/bench_step.py --base /work/wt-perf-base
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from plain_cartpole import PlainCartPole

SIZES = (64, 1_024, 4_096, 65_536, 1_048_576)
BATCHES = 8  # distinct pre-made action batches, cycled
RESULTS = Path(__file__).resolve().parent / "results" / "step.md"
# Bytes one CartPole env-step moves: action int64 read twice (check, step: 16), _done_ int32 read and
# written (8), state 4 x float32 read and written (32), obs (16), reward (4), terminated + truncated (2),
# _timestep_ int32 read and written (8), the running return float32 read and written (8), and the
# episode return, length (int64) and mask written (13).
BYTES_PER_ENV_STEP = 16 + 8 + 32 + 16 + 4 + 2 + 8 + 8 + 13

WORKER = r"""
import sys, time, numpy as np, torch
import kernelgym.envs as kge
envs = {}
for line in sys.stdin:
    n, steps = (int(v) for v in line.split())
    if n not in envs:
        env = kge.make("CartPole-v1", n, backend="cpu", seed=0)
        env.reset()
        batches = [torch.from_numpy(np.random.default_rng(k).integers(0, 2, n)) for k in range(8)]
        for k in range(20):
            env.step(batches[k % 8])
        envs[n] = (env, batches)
    env, batches = envs[n]
    start = time.perf_counter()
    for k in range(steps):
        env.step(batches[k % 8])
    print(time.perf_counter() - start, flush=True)
"""


def steps_for(n: int) -> int:
    return int(min(5000, max(3, 4e6 / n)))


def timed(step, batches, steps: int) -> float:
    start = time.perf_counter()
    for k in range(steps):
        step(batches[k % BATCHES])
    return time.perf_counter() - start


class Contenders:
    """Every contender's per-N setup: a callable taking one action batch."""

    def __init__(self, n: int, base_worker):
        import gymnasium as gym

        import kernelgym.envs as kge

        self.n = n
        rng = np.random.default_rng(0)
        self.torch_actions = [torch.from_numpy(rng.integers(0, 2, n)) for _ in range(BATCHES)]
        self.numpy_actions = [a.numpy() for a in self.torch_actions]
        env = kge.make("CartPole-v1", n, backend="cpu", seed=0)
        env.reset()
        lean = kge.make("CartPole-v1", n, backend="cpu", seed=0, episode_statistics=False)
        lean.reset()
        self.env = env
        gym_env = gym.make_vec("CartPole-v1", num_envs=n, vectorization_mode="vector_entry_point")
        gym_env.reset(seed=0)
        self.base_worker = base_worker
        self.runs = {
            "step()": (env.step, self.torch_actions),
            "step() numpy": (env.step, self.numpy_actions),
            "step() no statistics": (lean.step, self.numpy_actions),
            "kernel": (env._launch_step, self.numpy_actions),
            "plain loop + statistics": (PlainCartPole(n, statistics=True).step, self.numpy_actions),
            "plain loop": (PlainCartPole(n).step, self.numpy_actions),
            "gymnasium numpy vector": (gym_env.step, self.numpy_actions),
        }
        for name, (call, batches) in self.runs.items():  # warm up (compiles)
            timed(call, batches, 20 if name != "gymnasium numpy vector" else 3)

    def measure(self, name: str) -> float:
        steps = steps_for(self.n)
        if name == "gymnasium numpy vector":
            steps = max(3, steps // 8)  # slower: keep a round short
        if name == "step() before":
            self.base_worker.stdin.write(f"{self.n} {steps}\n")
            self.base_worker.stdin.flush()
            seconds = float(self.base_worker.stdout.readline())
            # the worker's OpenMP threads spin a while after its last launch: let them sleep
            # before the next contender runs, or they take its second core
            time.sleep(0.1)
            return self.n * steps / seconds
        call, batches = self.runs[name]
        return self.n * steps / timed(call, batches, steps)


def gymnax_rates(sizes, repeats):
    try:
        import gymnax
        import jax
    except ImportError:
        return None
    rates = {}
    for n in sizes:
        env, params = gymnax.make("CartPole-v1")
        keys = jax.random.split(jax.random.PRNGKey(0), n)
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(keys, params)

        def one(carry, key):
            state = carry
            actions = jax.random.randint(key, (n,), 0, 2)
            _, state, *_ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(jax.random.split(key, n), state, actions, params)
            return state, None

        scan = jax.jit(lambda s, k: jax.lax.scan(one, s, jax.random.split(k, 100))[0])
        jax.block_until_ready(scan(state, jax.random.PRNGKey(1)))
        values = []
        for r in range(repeats):
            start = time.perf_counter()
            jax.block_until_ready(scan(state, jax.random.PRNGKey(r)))
            values.append(100 * n / (time.perf_counter() - start))
        rates[n] = values
    return rates


def memory_bandwidth() -> float:
    """Bytes per second of a numpy copy of 256 MiB (read + write), best of 5."""
    source = np.ones(32 * 2**20, np.float64)
    target = np.empty_like(source)
    best = min(_seconds(lambda: np.copyto(target, source)) for _ in range(5))
    return 2 * source.nbytes / best


def _seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--sizes", type=int, nargs="*", default=list(SIZES))
    parser.add_argument("--base", type=Path, help="an older kernelgym checkout to time step() of")
    parser.add_argument("--no-write", action="store_true", help="print only; leave benchmarks/results/step.md alone")
    args = parser.parse_args()
    load_start = os.getloadavg()
    worker = None
    names = [
        "step()",
        "step() numpy",
        "step() no statistics",
        "kernel",
        "plain loop + statistics",
        "plain loop",
        "gymnasium numpy vector",
    ]
    if args.base is not None:
        packages = args.base / "packages"
        environment = {
            **os.environ,
            "PYTHONPATH": f"{packages / 'core/src'}:{packages / 'envs/src'}",
            "KERNELGYM_CACHE_DIR": str(args.base / ".cache"),
            "NUMBA_CACHE_DIR": str(args.base / ".cache/numba"),
        }
        worker = subprocess.Popen(
            [sys.executable, "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=environment
        )
        # last: the contender timed right after the worker ran slower even after the pause
        names.append("step() before")
    contenders = {n: Contenders(n, worker) for n in args.sizes}
    rates = {n: {name: [] for name in names} for n in args.sizes}
    bandwidths = []
    for round_ in range(args.repeats):
        bandwidths.append(memory_bandwidth())
        for n in args.sizes:
            # every other round in reverse order: a drift of the machine's speed within a round
            # then favours no contender
            for name in names if round_ % 2 == 0 else names[::-1]:
                rates[n][name].append(contenders[n].measure(name))
        print(f"round {round_ + 1}/{args.repeats} done", flush=True)
    if worker is not None:
        worker.stdin.close()
        worker.wait()
    notes = []
    gymnax = gymnax_rates(args.sizes, args.repeats)
    if gymnax is None:
        notes.append("gymnax is not installed here: its column is left out.")
    else:
        names.append("gymnax (jit+vmap, scan of 100)")
        for n in args.sizes:
            rates[n][names[-1]] = gymnax[n]
    try:
        import envpool  # noqa: F401

        notes.append("EnvPool is installed but not run by this script: see bench_envs.py --envpool-python.")
    except ImportError:
        notes.append("EnvPool is not installed here: its column is left out (bench_envs.py runs it from its own venv).")
    load_end = os.getloadavg()
    bandwidth = statistics.median(bandwidths)
    text = report(args, names, rates, bandwidth, load_start, load_end, notes)
    print(text)
    if not args.no_write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(text)


def fmt(values) -> str:
    return f"{statistics.median(values) / 1e6:.1f} M ({min(values) / 1e6:.1f}-{max(values) / 1e6:.1f})"


def paired_ratio(rates_a, rates_b) -> float:
    """The median of the per-round ratios a / b."""
    return statistics.median(a / b for a, b in zip(rates_a, rates_b))


def report(args, names, rates, bandwidth, load_start, load_end, notes) -> str:
    limit = bandwidth / BYTES_PER_ENV_STEP
    lines = [
        "## step() against the kernel, a plain numba loop and gymnasium (benchmarks/bench_step.py)",
        "",
        f"- date: {datetime.datetime.now().isoformat(timespec='minutes')}; machine: {platform.machine()}, "
        f"{os.cpu_count()} cores, {platform.processor() or platform.platform()}; Python {platform.python_version()}, "
        f"numba {__import__('numba').__version__}, threads {__import__('numba').get_num_threads()}",
        f"- command: `{' '.join([Path(sys.executable).name, *sys.argv])}`",
        f"- load average (1, 5, 15 min) at start {tuple(round(v, 2) for v in load_start)}, "
        f"at end {tuple(round(v, 2) for v in load_end)} (a shared machine: other jobs ran)",
        f"- memory bandwidth (numpy copy of 256 MiB, median of rounds): {bandwidth / 1e9:.1f} GB/s; "
        f"a CartPole env-step moves about {BYTES_PER_ENV_STEP} bytes, so memory alone caps it at "
        f"{limit / 1e6:.0f} M env-steps/s",
        f"- env-steps per second, median (min-max) of {args.repeats} interleaved rounds; CartPole, random actions",
        "",
        "| N | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for n, row in rates.items():
        lines.append(f"| {n:,} | " + " | ".join(fmt(row[name]) for name in names) + " |")
    ratios = [
        ("step() numpy", "plain loop + statistics"),
        ("step() no statistics", "plain loop"),
        ("step()", "plain loop + statistics"),
        ("step() numpy", "gymnasium numpy vector"),
        ("step()", "gymnasium numpy vector"),
    ]
    lines += [
        "",
        "Ratios: the median over rounds of each round's ratio (a round times every contender back to "
        "back, so a change of the machine's speed between rounds cancels), and in brackets the ratio of "
        "the best rounds (what each reaches when the machine is least disturbed); same work and same "
        "inputs in the first two, same numpy inputs in the fourth; and step() against memory alone "
        "(medians):",
        "",
        "| N | " + " | ".join(f"{a} / {b}" for a, b in ratios) + " | step() / memory limit |",
        "|---|" + "---|" * (len(ratios) + 1),
    ]
    for n, row in rates.items():
        median = {name: statistics.median(values) for name, values in row.items()}
        cells = [f"{paired_ratio(row[a], row[b]):.2f}x ({max(row[a]) / max(row[b]):.2f}x)" for a, b in ratios]
        lines.append(f"| {n:,} | " + " | ".join(cells) + f" | {median['step()'] / limit:.2f} |")
    per_call = [
        f"N = {n:,}: step() {n / statistics.median(row['step()']) * 1e6:.1f} us "
        f"(numpy actions {n / statistics.median(row['step() numpy']) * 1e6:.1f} us)"
        + (f", before {n / statistics.median(row['step() before']) * 1e6:.1f} us" if "step() before" in row else "")
        + f", kernel {n / statistics.median(row['kernel']) * 1e6:.1f} us, "
        f"plain loop + statistics {n / statistics.median(row['plain loop + statistics']) * 1e6:.1f} us, "
        f"plain loop {n / statistics.median(row['plain loop']) * 1e6:.1f} us"
        for n, row in rates.items()
        if n <= 1024
    ]
    lines += ["", "Per call: " + "; ".join(per_call) + ".", ""]
    lines += [f"- {note}" for note in notes]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
