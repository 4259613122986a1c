"""SB3 PPO's time to a mean return of 475 on CartPole: kernelgym's VecEnv vs SB3's
DummyVecEnv over gymnasium's CartPole, same hyperparameters, same run (a script, not a test).

    .venv/bin/python benchmarks/bench_sb3.py [--seeds 0 1 2] [--max-steps 200000]

Needs ``kernelgym-envs[sb3]``. Both runs use rl-baselines3-zoo's CartPole PPO settings,
8 envs, one torch thread, and stop when the mean return of the last 20 episodes reaches
475. Writes benchmarks/results/sb3.md (machine, date, versions, per-seed times, ratio).
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
import stable_baselines3
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env

from kernelgym.envs.sb3 import KernelSB3VecEnv

TARGET, WINDOW, NUM_ENVS = 475.0, 20, 8


class StopAtTarget(BaseCallback):
    """Stops training when the mean return of the last WINDOW episodes reaches TARGET."""

    def __init__(self):
        super().__init__()
        self.returns = []

    def _on_step(self):
        self.returns += [info["episode"]["r"] for info in self.locals["infos"] if "episode" in info]
        return not (len(self.returns) >= WINDOW and np.mean(self.returns[-WINDOW:]) >= TARGET)


def time_to_target(venv, seed: int, max_steps: int) -> tuple[float, int, bool]:
    model = PPO(
        "MlpPolicy",
        venv,
        n_steps=32,
        batch_size=256,
        gae_lambda=0.8,
        gamma=0.98,
        n_epochs=20,
        ent_coef=0.0,
        learning_rate=1e-3,
        clip_range=0.2,
        seed=seed,
        device="cpu",
    )
    callback = StopAtTarget()
    start = time.perf_counter()
    model.learn(max_steps, callback=callback)
    elapsed = time.perf_counter() - start
    reached = len(callback.returns) >= WINDOW and np.mean(callback.returns[-WINDOW:]) >= TARGET
    venv.close()
    return elapsed, model.num_timesteps, reached


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--max-steps", type=int, default=200_000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    load_at_start = os.getloadavg()[0]
    rows = []
    for seed in args.seeds:
        kernel = time_to_target(
            KernelSB3VecEnv("CartPole-v1", NUM_ENVS, backend="cpu", seed=seed), seed, args.max_steps
        )
        dummy = time_to_target(make_vec_env("CartPole-v1", n_envs=NUM_ENVS, seed=seed), seed, args.max_steps)
        rows.append((seed, kernel, dummy))
    load = os.getloadavg()
    lines = [
        "## SB3 PPO: time to a mean return of 475 on CartPole (benchmarks/bench_sb3.py)",
        "",
        f"- date: {datetime.date.today()}; machine: {platform.machine()}, {os.cpu_count()} cores, "
        f"load average {load_at_start:.1f} at the start, {load[0]:.1f} at the end; "
        f"Python {platform.python_version()}, torch {torch.__version__}, "
        f"stable-baselines3 {stable_baselines3.__version__}",
        f"- command: `.venv/bin/python benchmarks/bench_sb3.py --seeds {' '.join(map(str, args.seeds))} "
        f"--max-steps {args.max_steps}`",
        f"- PPO (rl-zoo CartPole settings), {NUM_ENVS} envs, one torch thread; stop when the mean return of the "
        f"last {WINDOW} episodes reaches {TARGET:.0f}",
        "",
        "| seed | kernelgym VecEnv s (steps) | DummyVecEnv + gymnasium s (steps) | ratio DummyVecEnv / kernelgym |",
        "|---|---|---|---|",
    ]
    ratios = []
    for seed, (k_time, k_steps, k_ok), (d_time, d_steps, d_ok) in rows:
        ratio = d_time / k_time
        if k_ok and d_ok:
            ratios.append(ratio)
        lines.append(
            f"| {seed} | {k_time:.1f} ({k_steps}){'' if k_ok else ' not reached'} | "
            f"{d_time:.1f} ({d_steps}){'' if d_ok else ' not reached'} | {ratio:.2f} |"
        )
    if ratios:
        lines += [
            "",
            f"Median ratio over seeds that reached 475 both ways: {statistics.median(ratios):.2f} "
            "(above 1: kernelgym's VecEnv reaches 475 sooner). The two runs of a seed differ in env "
            "steps as well as speed: the envs' random streams differ, so do the episodes.",
        ]
    text = "\n".join(lines) + "\n"
    out = Path(__file__).parent / "results" / "sb3.md"
    out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
