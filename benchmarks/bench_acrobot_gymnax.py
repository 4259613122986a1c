"""Acrobot-v1 env-steps/s: kernelgym's cpu backend against gymnax's jitted step, interleaved.

Run with kernelgym's venv; ``--gymnax-python`` names the python of a throwaway venv that
holds ``jax[cpu]`` and ``gymnax`` (never a kernelgym dependency; see benchmarks/README.md).
That python runs this same file with ``--serve``: it answers JSON requests on stdin,
``{"num_envs": N, "seconds": s}``, with ``{"rate": env-steps/s}`` (the first request for an N
compiles and warms it up). gymnax is timed in PureJaxRL's form, as bench_minatar_gymnax.py
does: ``jax.jit`` of a ``lax.scan`` over T steps of ``jax.vmap(env.step)`` with the random
actions drawn in the scan and gymnax's auto-reset; the observation stays in the carry.

kernelgym steps ``make("Acrobot-v1", N, backend="cpu")`` (the default build: float64
physics on float32 state) with pre-drawn random actions, under the default threading
strategy and with one thread (``KERNELGYM_CPU_THREADS=one``). The three are timed in turn,
``--rounds`` times, about ``--seconds`` each; each figure is the median. The machine's
1-minute load average is printed with every row: on a shared machine, compare the ratios.

    .venv/bin/python benchmarks/bench_acrobot_gymnax.py --gymnax-python /tmp/venv-gymnax/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ACTION_BATCHES = 4


def serve() -> None:
    """The gymnax side: answer rate requests from stdin, one JSON line each."""
    from importlib.metadata import version

    import gymnax
    import jax

    env, params = gymnax.make("Acrobot-v1")
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))
    reset = jax.vmap(env.reset, in_axes=(0, None))
    cells = {}

    def cell(n: int):
        if n not in cells:
            steps = max(2, min(1024, 2**17 // n))  # one call well under a second

            def body(carry, _):
                key, state, _obs = carry
                key, key_action, key_step = jax.random.split(key, 3)
                actions = jax.random.randint(key_action, (n,), 0, 3)
                # gymnax >= 1.0 returns (obs, state, reward, terminated, truncated, info)
                out = step(jax.random.split(key_step, n), state, actions, params)
                return (key, out[1], out[0]), None

            rollout = jax.jit(lambda carry: jax.lax.scan(body, carry, None, length=steps)[0])
            key = jax.random.PRNGKey(0)
            obs, state = reset(jax.random.split(key, n), params)
            carry = jax.block_until_ready(rollout((key, state, obs)))  # compile and warm up
            cells[n] = [rollout, carry, steps]
        return cells[n]

    print(json.dumps({"jax": version("jax"), "gymnax": version("gymnax")}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        rollout, carry, steps = cell(request["num_envs"])
        calls, start = 0, time.perf_counter()
        while True:
            carry = jax.block_until_ready(rollout(carry))
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= request["seconds"]:
                break
        cells[request["num_envs"]][1] = carry
        print(json.dumps({"rate": request["num_envs"] * steps * calls / elapsed}), flush=True)


def kernelgym_env(n: int, strategy: str | None):
    """Acrobot-v1 with ``n`` envs on the cpu backend, its launches bound under ``strategy``
    (``None``: the default)."""
    import kernelgym.envs as kge

    if strategy is None:
        os.environ.pop("KERNELGYM_CPU_THREADS", None)
    else:
        os.environ["KERNELGYM_CPU_THREADS"] = strategy
    env = kge.make("Acrobot-v1", n, backend="cpu", seed=0)
    env.reset()
    return env


def kernelgym_rate(env, actions, seconds: float) -> float:
    steps, start = 0, time.perf_counter()
    while True:
        for k in range(10):
            env.step(actions[k % ACTION_BATCHES])
        steps += 10
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return env.num_envs * steps / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", action="store_true", help="be the gymnax side (run by --gymnax-python)")
    parser.add_argument("--gymnax-python", help="python of a venv with jax[cpu] and gymnax")
    parser.add_argument("--num-envs", type=int, nargs="+", default=[1_024, 4_096, 65_536])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args()
    if args.serve:
        serve()
        return
    if not args.gymnax_python:
        parser.error("--gymnax-python: expected the python of a venv with jax[cpu] and gymnax, got nothing")

    import numba
    import numpy as np

    side = subprocess.Popen(
        [args.gymnax_python, os.path.abspath(__file__), "--serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )

    def gymnax_rate(n: int, seconds: float) -> float:
        side.stdin.write(json.dumps({"num_envs": n, "seconds": seconds}) + "\n")
        side.stdin.flush()
        return json.loads(side.stdout.readline())["rate"]

    versions = json.loads(side.stdout.readline())
    print(
        f"# Acrobot-v1 env-steps/s, median of {args.rounds} interleaved rounds of {args.seconds} s; "
        f"{os.cpu_count()} cpus, numba {numba.__version__} ({numba.config.NUMBA_NUM_THREADS} threads), "
        f"jax {versions['jax']}, gymnax {versions['gymnax']}"
    )
    print("| envs | kernelgym default | kernelgym 1 thread | gymnax | default / gymnax | 1 thread / gymnax | load |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    rng = np.random.default_rng(0)
    try:
        for n in args.num_envs:
            envs = {"default": kernelgym_env(n, None), "one": kernelgym_env(n, "one")}
            actions = [rng.integers(0, 3, n) for _ in range(ACTION_BATCHES)]
            gymnax_rate(n, 0.0)  # compile
            for env in envs.values():
                kernelgym_rate(env, actions, 0.5)  # warm up (the adaptive launch settles)
            rates = {"default": [], "one": [], "gymnax": []}
            for _ in range(args.rounds):
                for name, env in envs.items():
                    rates[name].append(kernelgym_rate(env, actions, args.seconds))
                rates["gymnax"].append(gymnax_rate(n, args.seconds))
            default, one, theirs = (statistics.median(rates[name]) for name in ("default", "one", "gymnax"))
            print(
                f"| {n:,} | {default / 1e6:.2f} M | {one / 1e6:.2f} M | {theirs / 1e6:.2f} M | "
                f"{default / theirs:.2f}x | {one / theirs:.2f}x | {os.getloadavg()[0]:.1f} |",
                flush=True,
            )
            for env in envs.values():
                env.close()
    finally:
        side.stdin.close()
        side.wait(timeout=60)
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")


if __name__ == "__main__":
    main()
