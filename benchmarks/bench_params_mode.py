"""Params compiled in (``KERNELGYM_PARAMS=constants``, the default) against params passed as
launcher arguments (``arguments``): compile time of a first and a second configuration that
differ in scalar params only, and the step rate, in ONE interleaved run.

Each measurement is a fresh Python process with empty ``NUMBA_CACHE_DIR`` and
``KERNELGYM_CACHE_DIR`` and one numba thread per launch (``KERNELGYM_CPU_THREADS=one``); it
makes, resets and steps the first configuration, then the second, then times steps of the
first at ``--num-envs``. The modes alternate within each round, so both see the same load.
Writes benchmarks/results/params_mode.md.

    .venv/bin/python benchmarks/bench_params_mode.py --repeats 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "params_mode.md"
MODES = ("constants", "arguments")
# (env id, first params, second params): the second differs in scalar params only
CONFIGURATIONS = {
    "CartPole-v1": ({}, {"length": 0.7, "force_mag": 12.5}),
    "TagContinuous-v0": (
        {"num_taggers": 2, "num_runners": 3},
        {"num_taggers": 2, "num_runners": 3, "use_full_observation": False, "num_other_agents_observed": 2},
    ),
}
CHILD = """
import json, sys, time
import numpy as np
import kernelgym.envs as kge
env_id, first, second = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
num_envs, steps = int(sys.argv[4]), int(sys.argv[5])
seconds = []
for params in (first, second):
    started = time.perf_counter()
    env = kge.make(env_id, num_envs=4, backend="cpu", seed=0, **params)
    env.reset(seed=0)
    env.step(env.action_space.sample())
    seconds.append(time.perf_counter() - started)
    env.close()
env = kge.make(env_id, num_envs=num_envs, backend="cpu", seed=0, **first)
env.reset(seed=0)
env.action_space.seed(0)
actions = [env.action_space.sample() for _ in range(8)]
for k in range(20):
    env.step(actions[k % 8])
started = time.process_time()
for k in range(steps):
    env.step(actions[k % 8])
rate = num_envs * steps / (time.process_time() - started)
print(json.dumps({"first": seconds[0], "second": seconds[1], "rate": rate}))
"""


def measure(env_id: str, mode: str, num_envs: int, steps: int) -> dict:
    """Compile seconds of both configurations and the step rate, in a fresh process with empty caches."""
    first, second = CONFIGURATIONS[env_id]
    with tempfile.TemporaryDirectory() as caches:
        env = dict(
            os.environ,
            KERNELGYM_PARAMS=mode,
            KERNELGYM_CPU_THREADS="one",
            NUMBA_CACHE_DIR=str(Path(caches) / "numba"),
            KERNELGYM_CACHE_DIR=str(Path(caches) / "kernelgym"),
        )
        configurations = [json.dumps(first), json.dumps(second)]
        command = [sys.executable, "-c", CHILD, env_id, *configurations, str(num_envs), str(steps)]
        out = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=list(CONFIGURATIONS), choices=list(CONFIGURATIONS))
    parser.add_argument("--num-envs", type=int, default=4096, help="envs of the step-rate run (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=300, help="timed steps (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=1, help="interleaved rounds (default: %(default)s)")
    options = parser.parse_args(argv)
    load_before = os.getloadavg()
    runs: dict = {(env_id, mode): [] for env_id in options.envs for mode in MODES}
    for _ in range(options.repeats):
        for env_id in options.envs:
            for mode in MODES:
                runs[env_id, mode].append(measure(env_id, mode, options.num_envs, options.steps))
                print(env_id, mode, runs[env_id, mode][-1], flush=True)

    def median(env_id, mode, key):
        return statistics.median(run[key] for run in runs[env_id, mode])

    lines = [
        f"cpu, one thread per launch, fresh caches per process, median of {options.repeats} interleaved "
        f"round(s); step rate at {options.num_envs:,} envs per second of process CPU time; load average "
        f"{load_before[0]:.2f} at the start, {os.getloadavg()[0]:.2f} at the end.",
        "",
        "| env | params | first configuration (compile) | second, other params (compile) | env-steps/s |",
        "|---|---|---:|---:|---:|",
    ]
    for env_id in options.envs:
        for mode in MODES:
            first, second, rate = (median(env_id, mode, key) for key in ("first", "second", "rate"))
            lines.append(f"| {env_id} | {mode} | {first:.1f} s | {second:.1f} s | {rate / 1e6:.2f} M |")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
