"""add_samples and sample throughput of kernelgym.memory against skrl and TorchRL, on the same shapes.

Run in a venv that has skrl and torchrl next to kernelgym-memory (they are optional: a
missing one is reported as such):

    python3 -m venv .venv-bench
    .venv-bench/bin/pip install torch==2.13.0 -c constraints.txt
    .venv-bench/bin/pip install skrl torchrl -e packages/memory -c constraints.txt
    .venv-bench/bin/python benchmarks/bench_memory.py

Writes benchmarks/results/memory.md and prints it. Every number is the median of
``--repeats`` timed runs after one warm-up run; the libraries take turns within each
repeat, so that on a shared machine they all see the same load.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import os
import platform
import statistics
import time

import torch

from kernelgym.memory import PrioritizedMemory, RandomMemory

# name -> (per-sample shape, dtype): four tensors, as a typical off-policy agent stores
TENSORS = {
    "states": ((8,), torch.float32),
    "actions": ((2,), torch.float32),
    "rewards": ((1,), torch.float32),
    "terminated": ((1,), torch.bool),
}


def batches(num_envs: int, count: int) -> list[dict[str, torch.Tensor]]:
    """Distinct pre-made batches, so that no library is timed making its input."""
    made = []
    for _ in range(count):
        made.append(
            {
                name: (torch.rand(num_envs, *shape) < 0.05) if dtype == torch.bool else torch.randn(num_envs, *shape)
                for name, (shape, dtype) in TENSORS.items()
            }
        )
    return made


def interleaved_rates(runs: dict, operations: int, repeats: int) -> dict:
    """Median operations per second of each run, timed in turn ``repeats`` times (after a
    warm-up of each), so that every library sees the same load on a shared machine."""
    for run in runs.values():
        run()
    rates = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            rates[name].append(operations / (time.perf_counter() - start))
    return {name: statistics.median(values) for name, values in rates.items()}


class Subject:
    """One library's add and sample, behind the same two calls."""

    name: str

    def add(self, batch):
        raise NotImplementedError

    def sample(self, batch_size: int):
        raise NotImplementedError


class KernelgymRandom(Subject):
    name = "kernelgym RandomMemory"

    def __init__(self, memory_size, num_envs, cls=RandomMemory, **kwargs):
        self.memory = cls(memory_size, num_envs, device="cpu", seed=0, **kwargs)
        for name, (shape, dtype) in TENSORS.items():
            self.memory.create_tensor(name, shape, dtype)
        self.names = list(TENSORS)

    def add(self, batch):
        self.memory.add_samples(**batch)

    def sample(self, batch_size):
        return self.memory.sample(self.names, batch_size)


class KernelgymPrioritized(KernelgymRandom):
    name = "kernelgym PrioritizedMemory"

    def __init__(self, memory_size, num_envs):
        super().__init__(memory_size, num_envs, cls=PrioritizedMemory)


class SkrlRandom(Subject):
    name = "skrl RandomMemory"

    def __init__(self, memory_size, num_envs):
        from skrl.memories.torch import RandomMemory as SkrlMemory

        self.memory = SkrlMemory(memory_size=memory_size, num_envs=num_envs, device="cpu", replacement=True)
        for name, (shape, dtype) in TENSORS.items():
            self.memory.create_tensor(name=name, size=shape[0], dtype=dtype)
        self.names = list(TENSORS)

    def add(self, batch):
        self.memory.add_samples(**batch)

    def sample(self, batch_size):
        return self.memory.sample(names=self.names, batch_size=batch_size)


class TorchRLLazy(Subject):
    name = "TorchRL ReplayBuffer(LazyTensorStorage)"

    def __init__(self, memory_size, num_envs):
        from tensordict import TensorDict
        from torchrl.data import LazyTensorStorage, ReplayBuffer

        self.TensorDict = TensorDict
        self.num_envs = num_envs
        self.buffer = ReplayBuffer(storage=LazyTensorStorage(memory_size * num_envs, device="cpu"))

    def add(self, batch):
        self.buffer.extend(self.TensorDict(batch, batch_size=[self.num_envs]))

    def sample(self, batch_size):
        return self.buffer.sample(batch_size)


class BareCopy(Subject):
    """The floor: copy_ into preallocated tensors, no bookkeeping (add only)."""

    name = "bare torch copy_ (floor)"

    def __init__(self, memory_size, num_envs):
        self.rows = {
            name: torch.zeros(memory_size, num_envs, *shape, dtype=dtype) for name, (shape, dtype) in TENSORS.items()
        }
        self.memory_size, self.index = memory_size, 0

    def add(self, batch):
        for name, value in batch.items():
            self.rows[name][self.index].copy_(value)
        self.index = (self.index + 1) % self.memory_size


def version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def measure(subject_types, args, made) -> list[dict]:
    subjects, results = {}, {}
    for subject_type in subject_types:
        try:
            subjects[subject_type.name] = subject_type(args.memory_size, args.num_envs)
            results[subject_type.name] = {"name": subject_type.name}
        except ImportError as error:
            results[subject_type.name] = {"name": subject_type.name, "error": f"not installed ({error.name})"}

    def adder(subject):
        def run():
            for batch in made:
                subject.add(batch)

        return run

    def sampler(subject):
        def run():
            for _ in range(args.sample_calls):
                subject.sample(args.batch_size)

        return run

    adds = interleaved_rates({name: adder(s) for name, s in subjects.items()}, len(made), args.repeats)
    samplers = {name: sampler(s) for name, s in subjects.items() if type(s).sample is not Subject.sample}
    samples = interleaved_rates(samplers, args.sample_calls * args.batch_size, args.repeats)
    for name in subjects:
        results[name]["add"] = adds[name]
        if name in samples:
            results[name]["sample"] = samples[name]
    return list(results.values())


def table(results: list[dict]) -> list[str]:
    """Markdown rows, with kernelgym RandomMemory (the first result) divided by each other library."""
    ours = results[0]

    def ratio(result, key):
        return f"{ours[key] / result[key]:.2f}x" if key in result and result is not ours else ""

    lines = [
        "| library | add (calls/s) | kernelgym / it | sample (rows/s) | kernelgym / it |",
        "|---|---:|---:|---:|---:|",
    ]
    for result in results:
        if "error" in result:
            lines.append(f"| {result['name']} | {result['error']} | | | |")
            continue
        sample = f"{result['sample'] / 1e6:.1f} M" if "sample" in result else "-"
        add = f"{result['add'] / 1e3:.1f} k"
        lines.append(f"| {result['name']} | {add} | {ratio(result, 'add')} | {sample} | {ratio(result, 'sample')} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memory-size", type=int, default=1024)
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=4096)
    parser.add_argument("--adds", type=int, default=2048, help="add_samples calls per timed run")
    parser.add_argument("--sample-calls", type=int, default=200, help="sample calls per timed run")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--threads", type=int, nargs="+", default=[torch.get_num_threads(), 1], help="torch intra-op thread counts"
    )
    parser.add_argument("--output", default=os.path.join(os.path.dirname(__file__), "results", "memory.md"))
    args = parser.parse_args()

    torch.manual_seed(0)
    made = batches(args.num_envs, args.adds)
    subjects = [KernelgymRandom, KernelgymPrioritized, SkrlRandom, TorchRLLazy, BareCopy]
    lines = [
        "## Memory: add_samples and sample throughput (CPU)",
        "",
        f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; machine: {platform.machine()}, "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} (shared machine), "
        f"{platform.python_implementation()} {platform.python_version()}",
        f"- versions: torch {torch.__version__}, kernelgym-memory {version('kernelgym-memory')}, "
        f"skrl {version('skrl')}, torchrl {version('torchrl')}, tensordict {version('tensordict')}",
        f"- shapes: memory_size {args.memory_size}, num_envs {args.num_envs}, tensors "
        + ", ".join(f"{name} {shape} {str(dtype).removeprefix('torch.')}" for name, (shape, dtype) in TENSORS.items()),
        f"- add: {args.adds} calls of one ({args.num_envs}, ...) batch per tensor; sample: {args.sample_calls} calls "
        f"of {args.batch_size} rows of all four tensors, with replacement; medians of {args.repeats} interleaved runs "
        "after a warm-up",
        "- command: `.venv-bench/bin/python benchmarks/bench_memory.py` (ratio = kernelgym RandomMemory / that row)",
    ]
    for threads in args.threads:
        torch.set_num_threads(threads)
        lines += ["", f"torch intra-op threads: {threads}", ""] + table(measure(subjects, args, made))
    text = "\n".join(lines) + "\n"
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w") as file:
        file.write(text)
    print(text)


if __name__ == "__main__":
    main()
