"""Host time of a CartPole step, launch path by launch path, at 64, 4,096 and 65,536 envs.

Two launch paths bind a cuda kernel (`kernelgym.core.prebuilt_launch`): numba-cuda's own
launch (``KERNELGYM_LAUNCH=numba``), which types and converts every argument at every call,
and the prebuilt one (the default), one ``cuLaunchKernel`` over parameters written at bind.

- ``--backend cuda`` (a GPU): real ``env.step()`` calls, both paths and the action check on
  (``deferred``) and off, side by side in one process: the host microseconds per step (the
  loop's time before the final synchronization) and the microseconds per step with it. Each
  row names the path every launch took, so a fallback shows.
- ``--backend cpu`` (no GPU, what CI can time): the Python of a cuda step with the driver call
  replaced by a no-op. The prebuilt path is the env's own step launches prebuilt over
  stand-ins of its buffers (`prebuilt_launch.stand_in_launches`), called as a cuda step calls
  them. numba-cuda's path is timed as the two per-argument calls its launch makes for every
  argument (``typeof``, ``_Kernel._prepare_args``) on the same stand-ins: a lower bound of
  its cost, since the dispatcher's lookup and cuda.core's launch come on top.

Each figure is the median of ``--repeats`` runs after a warm-up; JSON lines go to stdout as
they are measured (``--json``), a table last, also written as the markdown section
``benchmarks/results/launch.md`` (``launch_cuda.md`` for ``--backend cuda``).

    .venv/bin/python benchmarks/bench_launch.py                   # no GPU: the stubbed host path
    python benchmarks/bench_launch.py --backend cuda              # on a GPU
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

SIZES = (64, 4_096, 65_536)
RESULTS = Path(__file__).resolve().parent / "results"


def median_seconds(run, repeats: int, calls: int) -> float:
    """Median seconds of one of ``calls`` calls of ``run``, over ``repeats`` runs after a warm-up."""
    run()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            run()
        seconds.append((time.perf_counter() - start) / calls)
    return statistics.median(seconds)


def stubbed_rows(sizes, repeats: int, calls: int):
    """The Python of a cuda CartPole step, driver call stubbed: one row per (N, path)."""
    from numba.cuda.dispatcher import _Kernel
    from numba.cuda.typing.typeof import Purpose, typeof

    import kernelgym.envs as kge
    from kernelgym.core.prebuilt_launch import stand_in_launches

    succeeded = (0,)

    def no_driver(*arguments):
        return succeeded

    for num_envs in sizes:
        env = kge.make("CartPole-v1", num_envs, backend="cpu", seed=0)
        launches, bound, per_call = stand_in_launches(env._step_launch, no_driver)
        pairs = list(zip(launches, per_call))

        def prebuilt_step():
            for launch, templates in pairs:
                launch(*templates)

        # numba-cuda's launch: for every argument, typeof (its dispatcher's lookup key) and
        # _prepare_args (its conversion), on the same stand-ins
        arguments = [(*values, *templates) for values, templates in zip(bound, per_call)]
        shim = type("KernelParameters", (), {"extensions": (), "_prepare_args": _Kernel._prepare_args})()

        def numba_arguments():
            for values in arguments:
                items = []
                for value in values:
                    shim._prepare_args(typeof(value, Purpose.argument), value, 0, [], items)

        parameters = sum(launch.num_parameters for launch in launches)
        num_arguments = sum(len(values) for values in arguments)
        for path, run in (
            ("prebuilt (driver stubbed)", prebuilt_step),
            ("numba typeof + _prepare_args", numba_arguments),
        ):
            yield {
                "envs": num_envs,
                "path": path,
                "host_us_per_step": median_seconds(run, repeats, calls) * 1e6,
                "launches": len(launches),
                "arguments": num_arguments,
                "parameters": parameters,
            }
        env.close()


def cuda_rows(sizes, repeats: int, calls: int):
    """Real cuda steps: both launch paths, check on and off, one process."""
    import torch

    import kernelgym.envs as kge
    from kernelgym.core.prebuilt_launch import launch_path

    for num_envs in sizes:
        for check in (True, False):
            for path in ("numba", "prebuilt"):
                os.environ["KERNELGYM_LAUNCH"] = path  # read when the env binds its launches
                env = kge.make("CartPole-v1", num_envs, backend="cuda", seed=0, check_action_values=check)
                env.reset(seed=0)
                env.action_space.seed(0)
                actions = [torch.as_tensor(env.action_space.sample(), device=env.device) for _ in range(4)]
                paths = sorted({launch_path(launch) for launch in env._step_launch.launches})
                for k in range(20):
                    env.step(actions[k % 4])
                torch.cuda.synchronize()
                host, total = [], []
                for _ in range(repeats):
                    start = time.perf_counter()
                    for k in range(calls):
                        env.step(actions[k % 4])
                    host.append((time.perf_counter() - start) / calls)
                    torch.cuda.synchronize()
                    total.append((time.perf_counter() - start) / calls)
                env.check_actions()
                yield {
                    "envs": num_envs,
                    "path": path,
                    "taken": "+".join(paths),
                    "check_action_values": check,
                    "host_us_per_step": statistics.median(host) * 1e6,
                    "us_per_step": statistics.median(total) * 1e6,
                    "env_steps_per_s": num_envs / statistics.median(total),
                }
                env.close()
    os.environ.pop("KERNELGYM_LAUNCH", None)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("cpu", "cuda"), default="cpu", help="cpu: the stubbed host path")
    parser.add_argument("--envs", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--calls", type=int, default=2000, help="steps per timed run")
    parser.add_argument("--json", action="store_true", help="print each row as a JSON line as it is measured")
    args = parser.parse_args(argv)
    if args.backend == "cuda":
        from numba import cuda

        if not cuda.is_available():
            print("--backend cuda: expected a usable CUDA GPU, got none", file=sys.stderr)
            return 2
        rows = cuda_rows(args.envs, args.repeats, args.calls)
    else:
        rows = stubbed_rows(args.envs, args.repeats, args.calls)
    table = []
    for row in rows:
        table.append(row)
        if args.json:
            print(json.dumps(row), flush=True)
    cuda = args.backend == "cuda"
    lines = [
        "## Host time of a CartPole step by launch path (benchmarks/bench_launch.py)",
        "",
        f"{datetime.date.today()}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.2f} at the end; medians of {args.repeats} runs of {args.calls} steps. "
        + (
            "Real cuda steps, both paths and the action check on and off in one process."
            if cuda
            else "No GPU: the Python of a cuda step with `cuLaunchKernel` stubbed (prebuilt), against "
            "the two calls numba-cuda's launch makes per argument (typeof, _prepare_args) on the same "
            "stand-in arrays, a lower bound of its path."
        ),
        "",
        "| envs | path | host us/step | " + ("us/step | check (paths taken) |" if cuda else "arguments |"),
        "|---:|---|---:|---:|" + ("---|" if cuda else ""),
    ]
    for row in table:
        extra = (
            f"{row['us_per_step']:.1f} | {row['check_action_values']} ({row['taken']}) |"
            if cuda
            else f"{row['arguments']} |"
        )
        lines.append(f"| {row['envs']:,} | {row['path']} | {row['host_us_per_step']:.2f} | {extra}")
    text = "\n".join(lines) + "\n"
    print("\n" + text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / ("launch_cuda.md" if cuda else "launch.md")).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
