"""kernelgym on Ray: RayCollector against the in-process DeviceCollector and TorchRL's RayCollector,
RayVectorSampledTasks against VectorSampledTasks, and the bytes a fragment costs on the wire.

All collectors roll kernelgym's CartPole-v1 (cpu backend, ``NUM_ENVS`` envs per collector,
``same_step`` autoreset) with the same deterministic linear policy, ``N_STEPS`` steps per
fragment (TorchRL: ``frames_per_batch = N_STEPS * NUM_ENVS`` per collector). TorchRL wraps
kernelgym's gymnasium adapter (``KernelGymnasiumVectorEnv``) in its ``GymWrapper``; the adapter
announces its autoreset mode in ``metadata`` only, and TorchRL reads the attribute
``autoreset_mode``, so this script sets that attribute by hand. Every case runs after a warm-up
fragment, in one local Ray cluster of ``--cpus`` logical CPUs (the in-process case before Ray
starts); TorchRL runs last (its shutdown stops Ray). Needs torchrl and tensordict (a separate venv: see BENCHMARKS.md).

Run: ``python benchmarks/bench_ray.py [--fragments 10] [--cpus 2]``.
Writes ``benchmarks/results/ray.md`` and prints it.
"""

from __future__ import annotations

import argparse
import datetime
import os
import pickle
import platform
import time
from importlib.metadata import version
from pathlib import Path

import numpy as np
import ray
import torch

import kernelgym.envs as kge
from kernelgym.collectors import GymTaskSampler, VectorSampledTasks
from kernelgym.collectors.device_collector import DeviceCollector
from kernelgym.collectors.ray import RayCollector, RayVectorSampledTasks
from kernelgym.collectors.rollout import Actor
from kernelgym.collectors.rollout.nested import leaves

ENV_ID, NUM_ENVS, N_STEPS, SEED = "CartPole-v1", 256, 64, 0
RESULTS = Path(__file__).parent / "results" / "ray.md"
WEIGHT = (0.0, 0.0, 1.0, 1.0)
READING = (
    "Reading: on one 2-core machine the actors and the learner share the same cores and every fragment "
    "crosses processes (pickled, about 56 bytes per CartPole transition), so the Ray forms cost throughput "
    "here; they pay off where the cluster brings more cores or GPUs than one machine. TorchRL's collector "
    "steps the same env through the gymnasium adapter and a TensorDict per step, which dominates at this batch."
)


class LinearActor(Actor):
    """Pushes right when ``obs @ weight > 0`` (the same rule as ``LinearPolicy`` below)."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.tensor(WEIGHT), requires_grad=False)

    def step(self, stepno, obs, act, rew, fin, *, hx=None, virtual=False):
        return (obs @ self.weight > 0).long(), (), {}


class LinearPolicy(torch.nn.Module):
    """TorchRL's side of the same policy (observation in, integer action out)."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.tensor(WEIGHT), requires_grad=False)

    def forward(self, observation):
        return (observation @ self.weight > 0).long()


def rate(fragments, count: int, steps_per_fragment: int) -> float:
    """Env-steps per second over ``count`` fragments after one warm-up fragment."""
    next(fragments)
    started = time.perf_counter()
    for _ in range(count):
        next(fragments)
    return count * steps_per_fragment / (time.perf_counter() - started)


def in_process(count: int) -> float:
    """One thread, as each one-CPU actor runs (two would spin against each other on a busy machine)."""
    import numba

    numba.set_num_threads(1)
    torch.set_num_threads(1)
    env = kge.make(ENV_ID, NUM_ENVS, backend="cpu", seed=SEED, autoreset_mode="same_step")
    return rate(iter(DeviceCollector(env, LinearActor(), N_STEPS, seed=SEED)), count, N_STEPS * NUM_ENVS)


def on_ray(count: int, collectors: int, sync: bool = True) -> tuple[float, int, int]:
    """(env-steps/s, pickled bytes of one fragment, bytes of its tensors)."""
    with RayCollector(
        ENV_ID, LinearActor(), N_STEPS, num_envs=NUM_ENVS, num_collectors=collectors, seed=SEED, sync=sync
    ) as collector:
        fragments = iter(collector)
        steps = rate(
            fragments, count * collectors if not sync else count, N_STEPS * NUM_ENVS * (collectors if sync else 1)
        )
        if not sync:
            return steps, 0, 0
        one = collector.collect()
        width = collectors  # bytes per actor's fragment: the joined one divided by the actors
        return steps, len(pickle.dumps(one, protocol=5)) // width, sum(t.nbytes for t in leaves(one)) // width


def torchrl_ray(count: int, collectors: int) -> float:
    from tensordict.nn import TensorDictModule
    from torchrl.collectors.distributed import RayCollector as TorchRLRayCollector
    from torchrl.envs import GymWrapper

    from kernelgym.envs.gymnasium_adapter import KernelGymnasiumVectorEnv

    def make_env():
        inner = KernelGymnasiumVectorEnv(
            ENV_ID, num_envs=NUM_ENVS, backend="cpu", seed=SEED, autoreset_mode="same_step"
        )
        inner.autoreset_mode = inner.metadata["autoreset_mode"]  # by hand: see the module docstring
        return GymWrapper(inner, categorical_action_encoding=True)

    policy = TensorDictModule(LinearPolicy(), in_keys=["observation"], out_keys=["action"])
    collector = TorchRLRayCollector(
        [make_env] * collectors,
        policy,
        frames_per_batch=N_STEPS * NUM_ENVS * collectors,
        total_frames=(count + 1) * N_STEPS * NUM_ENVS * collectors,
        sync=True,
        remote_configs={"num_cpus": 1, "num_gpus": 0},
    )
    try:
        collector.update_policy_weights_(policy)
        return rate(iter(collector), count, N_STEPS * NUM_ENVS * collectors)
    finally:
        collector.shutdown()


def step_overhead(steps: int) -> tuple[float, float]:
    """Microseconds per ``step`` of 4 CartPole tasks in 2 workers: processes, then Ray actors."""
    args = [{"env": ENV_ID, "seed": k} for k in range(4)]
    actions = np.zeros(4, dtype=np.int64)
    timings = []
    for make in (
        lambda: VectorSampledTasks(GymTaskSampler, args, multiprocessing_start_method="forkserver", max_processes=2),
        lambda: RayVectorSampledTasks(GymTaskSampler, args, max_processes=2, num_cpus=0.5),
    ):
        with make() as tasks:
            for _ in range(50):
                tasks.step(actions)
            started = time.perf_counter()
            for _ in range(steps):
                tasks.step(actions)
            timings.append((time.perf_counter() - started) / steps * 1e6)
    return timings[0], timings[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fragments", type=int, default=10)
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--steps", type=int, default=1000, help="vector-task steps for the overhead")
    options = parser.parse_args()
    load = os.getloadavg()[0]
    local = in_process(options.fragments)  # before Ray starts: its booting workers would take the CPUs
    ray.init(num_cpus=options.cpus, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    ray1, pickled, raw = on_ray(options.fragments, 1)
    ray2, _, _ = on_ray(options.fragments, 2)
    ray2_async, _, _ = on_ray(options.fragments, 2, sync=False)
    process_us, ray_us = step_overhead(options.steps)
    print(f"in-process {local:,.0f}, ray 1 {ray1:,.0f}, 2 {ray2:,.0f}, async {ray2_async:,.0f} env-steps/s", flush=True)
    trl1 = torchrl_ray(options.fragments, 1)
    trl2 = torchrl_ray(options.fragments, 2)

    batch = f"{N_STEPS} steps x {NUM_ENVS} envs per collector"
    rows = [
        ("in-process DeviceCollector", local),
        ("kernelgym RayCollector, 1 actor (sync)", ray1),
        ("kernelgym RayCollector, 2 actors (sync)", ray2),
        ("kernelgym RayCollector, 2 actors (async)", ray2_async),
        ("TorchRL RayCollector, 1 collector (sync)", trl1),
        ("TorchRL RayCollector, 2 collectors (sync)", trl2),
    ]
    lines = [
        "## kernelgym on Ray (CartPole-v1)",
        "",
        f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, load average {load:.1f} at start "
        "(a machine shared with other jobs); a local Ray cluster of "
        f"{options.cpus} logical CPUs, one CPU (one numba and torch thread) per actor and in process",
        f"- versions: ray {version('ray')}, torch {torch.__version__}, torchrl {version('torchrl')}, "
        f"tensordict {version('tensordict')}",
        f"- command: `python benchmarks/bench_ray.py --fragments {options.fragments} --cpus {options.cpus} "
        f"--steps {options.steps}` (in a venv with torchrl and tensordict)",
        f"- method: {ENV_ID} on kernelgym's cpu backend, {batch}, the same deterministic linear policy "
        f"everywhere, {options.fragments} fragments after one warm-up, one run; TorchRL wraps kernelgym's "
        "gymnasium adapter in `GymWrapper` with `autoreset_mode` set on it by hand (the adapter announces it "
        "in `metadata` only)",
        "",
        "| collector | env-steps/s | vs in-process |",
        "|---|---:|---:|",
        *[f"| {name} | {value:,.0f} | {value / local:.2f}x |" for name, value in rows],
        "",
        f"kernelgym's RayCollector over TorchRL's: {ray1 / trl1:.2f}x with one actor each, "
        f"{ray2 / trl2:.2f}x with two.",
        "",
        f"Bytes sent per fragment ({batch}, CartPole obs float32 x 4): {pickled:,} pickled "
        f"(its tensors {raw:,}; {pickled / (N_STEPS * NUM_ENVS):.1f} bytes per transition).",
        "",
        f"| 4 CartPole tasks in 2 workers, one `step` ({options.steps} steps) | us per step |",
        "|---|---:|",
        f"| VectorSampledTasks (2 forkserver processes) | {process_us:,.0f} |",
        f"| RayVectorSampledTasks (2 Ray actors) | {ray_us:,.0f} |",
        f"| Ray's overhead per step | {ray_us - process_us:+,.0f} ({ray_us / process_us:.2f}x) |",
        "",
        READING,
        "",
    ]
    text = "\n".join(lines) + "\n"
    RESULTS.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
