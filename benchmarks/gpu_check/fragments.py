"""Host time per step of captured fragments against eager ones, for the GPU check.

``part_fragments(backend, tiny)`` prints one JSON line per measurement (as `parts.py` does),
each with the commit it measured:

- ``fragments``: a `DeviceCollector` on CartPole (4,096 envs, 16-step fragments, a 4-64-2
  MLP acting by argmax), eager and with ``capture=True``;
- ``fragments_env``: ``env.step(policy(obs))`` 16 times, eager and as one
  ``capture_step(..., steps=16)`` replay.

Host time is the time the calls take to return (the GPU runs behind them); the total adds
one device synchronization at the end of each timed run. Both paths run in one process,
side by side. Where capture is unavailable (the cpu backend, or a fallback) the captured
line says so, with the reason, and the eager line is measured all the same.

    python benchmarks/gpu_check/fragments.py [--backend cuda|cpu] [--tiny]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
NUM_ENVS, STEPS = 4096, 16


def commit() -> str:
    """The measured commit: ``KERNELGYM_COMMIT`` if set, else git's (``+dirty`` with local changes)."""
    if os.environ.get("KERNELGYM_COMMIT"):
        return os.environ["KERNELGYM_COMMIT"]
    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as error:
        return f"unknown ({type(error).__name__}: no git checkout; set KERNELGYM_COMMIT)"
    return head + ("+dirty" if dirty else "")


def emit(part: str, **fields) -> None:
    """Print one result line (JSON), at once, with the commit."""
    print(json.dumps({"part": part, "commit": COMMIT, **fields}, default=str), flush=True)


def synchronize(backend: str) -> None:
    if backend == "cuda":
        import torch

        torch.cuda.synchronize()


def host_and_total(run, backend: str, calls: int, repeats: int) -> tuple[float, float]:
    """Median seconds per call of ``run()``: returned to the host, and with the final synchronization."""
    run()
    synchronize(backend)
    host, total = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            run()
        returned = time.perf_counter()
        synchronize(backend)
        done = time.perf_counter()
        host.append((returned - start) / calls)
        total.append((done - start) / calls)
    return statistics.median(host), statistics.median(total)


def mlp(device):
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.Tanh(), torch.nn.Linear(64, 2)).to(device)


def collector(backend: str, num_envs: int, capture: bool):
    """A CartPole env and a `DeviceCollector` of 16-step fragments, eager or captured; with the
    `CaptureFallbackWarning` s its construction and first fragment gave."""
    import torch

    import kernelgym.envs as kge
    from kernelgym.collectors import DeviceCollector
    from kernelgym.collectors.device_collector import CaptureFallbackWarning
    from kernelgym.collectors.rollout.actor import Actor

    class ArgmaxActor(Actor):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def step(self, stepno, obs, act, rew, fin, *, hx=None, virtual=False):
            return self.net(obs).argmax(-1), (), {}

    env = kge.make("CartPole-v1", num_envs, backend=backend, seed=0, autoreset_mode="same_step")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CaptureFallbackWarning)
        fragments = DeviceCollector(env, ArgmaxActor(mlp(env.device)), STEPS, seed=0, capture=capture)
        with torch.no_grad():
            fragments.collect()  # eager (captured: the warm-up, then the capture)
    return env, fragments, [str(w.message) for w in caught if issubclass(w.category, CaptureFallbackWarning)]


def measure_collector(backend: str, num_envs: int, calls: int, repeats: int) -> None:
    import torch

    for capture in (False, True):
        env, fragments, fallbacks = collector(backend, num_envs, capture)
        try:
            if capture and not fragments.captured:
                emit(
                    "fragments",
                    path="captured",
                    envs=num_envs,
                    steps_per_fragment=STEPS,
                    available=False,
                    reason=fragments.eager_reason or "; ".join(fallbacks),
                )
                continue
            with torch.no_grad():
                host, total = host_and_total(fragments.collect, backend, calls, repeats)
            emit(
                "fragments",
                path="captured" if capture else "eager",
                envs=num_envs,
                steps_per_fragment=STEPS,
                available=True,
                host_us_per_step=host / STEPS * 1e6,
                us_per_step_with_final_sync=total / STEPS * 1e6,
                env_steps_per_s=num_envs * STEPS / total,
                check_action_values=env.check_action_values,
            )
        finally:
            env.close()


def measure_env(backend: str, num_envs: int, calls: int, repeats: int) -> None:
    import torch

    import kernelgym.envs as kge
    from kernelgym.envs.cuda_graph import capture_step

    env = kge.make("CartPole-v1", num_envs, backend=backend, seed=0)
    try:
        net = mlp(env.device)
        obs, _ = env.reset(seed=0)

        def policy(observations):
            return net(observations).argmax(-1)

        def eager():
            for _ in range(STEPS):
                env.step(policy(obs))

        with torch.no_grad():
            host, total = host_and_total(eager, backend, calls, repeats)
        emit(
            "fragments_env",
            path="eager",
            envs=num_envs,
            steps_per_call=STEPS,
            host_us_per_step=host / STEPS * 1e6,
            us_per_step_with_final_sync=total / STEPS * 1e6,
            check_action_values=env.check_action_values,
        )
        try:
            captured = capture_step(env, policy, obs, steps=STEPS)
        except ValueError as error:  # capture_step refuses what a graph cannot hold, naming why
            emit("fragments_env", path="captured", envs=num_envs, available=False, reason=str(error))
            return
        host, total = host_and_total(captured.replay, backend, calls, repeats)
        env.check_actions()
        emit(
            "fragments_env",
            path="captured",
            envs=num_envs,
            steps_per_call=STEPS,
            available=True,
            host_us_per_step=host / STEPS * 1e6,
            us_per_step_with_final_sync=total / STEPS * 1e6,
        )
    finally:
        env.close()


def part_fragments(backend: str, tiny: bool) -> None:
    """Host time per step of 16-step fragments at 4,096 envs (64 with ``tiny``): a
    `DeviceCollector` and ``capture_step``, eager and captured, side by side."""
    num_envs = 64 if tiny else NUM_ENVS
    calls, repeats = (2, 3) if tiny else (50, 5)
    measure_collector(backend, num_envs, calls, repeats)
    measure_env(backend, num_envs, calls, repeats)


COMMIT = commit()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--tiny", action="store_true", help="tiny sizes: check the code path")
    options = parser.parse_args(argv)
    part_fragments(options.backend, options.tiny)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
