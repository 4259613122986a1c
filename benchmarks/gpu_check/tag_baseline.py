"""GPU check part: kernelgym's TagGridWorld (partial observation) against a hand-written CUDA C kernel.

The baseline (benchmarks/tag_cuda_c) is WarpDrive's design: one launch per step, one
block per env, one thread per agent. Both run the same sizes from the same start with the
same random actions, made on the device: the observations, rewards, terminated and
truncated flags must be equal at every one of 100 steps; then each is timed.

    python benchmarks/gpu_check/tag_baseline.py [--backend cuda|cpu] [--tiny]

On the cpu the baseline cannot run: the part says so, compiles the baseline to PTX when
NVRTC is installed, and times kernelgym's cpu env.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # parts
sys.path.insert(0, str(HERE.parent))  # bench_tag, tag_cuda_c

from parts import emit, timed_median  # noqa: E402

PART = "tag_baseline"
ENV_ID = "TagGridWorld-v0"
COMPARED_STEPS = 100
ACTION_BATCHES = 4


def sizes(tiny: bool) -> tuple[int, dict]:
    """Env count and params: WarpDrive's 2,000 envs x 1,000 agents (999 taggers, 1 runner), or tiny."""
    if tiny:
        return 8, {"num_taggers": 15, "num_runners": 1, "use_full_observation": False}
    return 2_000, {"num_taggers": 999, "num_runners": 1, "use_full_observation": False}


def random_actions(num_envs: int, num_agents: int, count: int, device: str, seed: int):
    """``count`` batches of int64 actions in [0, 5), made on ``device``."""
    import torch

    generator = torch.Generator(device=device).manual_seed(seed)
    return [
        torch.randint(0, 5, (num_envs, num_agents), generator=generator, device=device, dtype=torch.int64)
        for _ in range(count)
    ]


def first_difference(ours: dict, theirs: dict) -> str | None:
    """The name of the first output that differs in dtype, shape or any value (None: all equal)."""
    import torch

    for name, mine in ours.items():
        other = theirs[name]
        if mine.dtype != other.dtype or mine.shape != other.shape or not torch.equal(mine, other):
            return name
    return None


def _outputs(obs, rewards, terminated, truncated) -> dict:
    return {"obs": obs, "rewards": rewards, "terminated": terminated, "truncated": truncated}


def _compile_only(params) -> dict:
    """What the cpu run can say about the baseline: its PTX size for sm_90, or why it did not compile."""
    from tag_cuda_c.baseline import compile_source

    try:
        return {"ptx_bytes_sm_90": len(compile_source(params, "sm_90", "ptx"))}
    except (ImportError, RuntimeError) as error:  # no cuda-bindings, or no NVRTC library (cuda.pathfinder)
        return {"compiled": f"not compiled: {type(error).__name__}: {error}"}


def part_tag_baseline(backend: str, tiny: bool) -> None:
    """Equality over 100 steps, then the rates of kernelgym and the CUDA C baseline (cuda);
    on the cpu, kernelgym's rate and the baseline reported as not run."""
    import torch
    from bench_tag import bytes_per_env_step

    import kernelgym.envs as kge
    from kernelgym.envs.tag.gridworld import TagGridWorldParams

    num_envs, overrides = sizes(tiny)
    params = TagGridWorldParams(**overrides)
    device = "cuda" if backend == "cuda" else "cpu"
    steps, repeats = (5, 2) if tiny else (200, 5)
    traffic = bytes_per_env_step(params.num_agents)
    env = kge.make(ENV_ID, num_envs, backend=backend, seed=0, check_action_values=False, **overrides)
    try:
        env.reset(seed=0)
        timed_actions = random_actions(num_envs, params.num_agents, ACTION_BATCHES, device, seed=1)

        def run_kernelgym():
            for k in range(steps):
                env.step(timed_actions[k % ACTION_BATCHES])

        def kernelgym_alone(baseline: str, **fields) -> None:
            rate = num_envs * steps / timed_median(run_kernelgym, backend, repeats)
            emit(
                PART,
                check="rates",
                backend=backend,
                envs=num_envs,
                agents=params.num_agents,
                kernelgym_env_steps_per_s=rate,
                bytes_per_env_step=traffic,
                baseline=baseline,
                **fields,
            )

        if backend != "cuda":
            kernelgym_alone("not run: the CUDA C baseline needs a GPU", **_compile_only(params))
            return
        from tag_cuda_c.baseline import CudaTagGridWorld

        try:
            baseline = CudaTagGridWorld(params, num_envs)
        except (ImportError, RuntimeError) as error:
            # say why in the results, keep kernelgym's rate, and still fail the part
            kernelgym_alone(f"failed: {type(error).__name__}: {error}")
            raise
        started = time.perf_counter()
        obs, _ = env.reset(seed=0)
        baseline.reset()
        torch.cuda.synchronize()
        differs = first_difference({"obs": torch.as_tensor(obs)}, {"obs": baseline.obs})
        first_differing_step, differing_output = (0, differs) if differs else (None, None)
        episodes_ended = 0
        compared_actions = random_actions(num_envs, params.num_agents, COMPARED_STEPS, device, seed=2)
        for step, actions in enumerate(compared_actions, start=1):
            theirs = _outputs(*(torch.as_tensor(value) for value in env.step(actions)[:4]))
            baseline.step(actions)
            # kernelgym's stream may not be torch's: both steps end before the comparison reads
            torch.cuda.synchronize()
            ours = _outputs(baseline.obs, baseline.rewards, baseline.terminated, baseline.truncated)
            episodes_ended += int((ours["terminated"] | ours["truncated"]).sum())
            differs = first_difference(theirs, ours)
            if differs and first_differing_step is None:
                first_differing_step, differing_output = step, differs
        emit(
            PART,
            check="equal outputs",
            envs=num_envs,
            agents=params.num_agents,
            steps=COMPARED_STEPS,
            episodes_ended=episodes_ended,
            first_differing_step=first_differing_step,
            differing_output=differing_output,
            ok=first_differing_step is None,
            seconds=round(time.perf_counter() - started, 1),
        )

        def run_baseline():
            for k in range(steps):
                baseline.step(timed_actions[k % ACTION_BATCHES])

        env.reset(seed=0)
        baseline.reset()
        rates = {}
        for name, run in (("kernelgym", run_kernelgym), ("cuda_c", run_baseline)):
            rates[name] = num_envs * steps / timed_median(run, backend, repeats)
        emit(
            PART,
            check="rates",
            envs=num_envs,
            agents=params.num_agents,
            steps_per_run=steps,
            kernelgym_env_steps_per_s=rates["kernelgym"],
            cuda_c_env_steps_per_s=rates["cuda_c"],
            kernelgym_over_cuda_c=rates["kernelgym"] / rates["cuda_c"],
            bytes_per_env_step=traffic,
            kernelgym_GBps=rates["kernelgym"] * traffic / 1e9,
            cuda_c_GBps=rates["cuda_c"] * traffic / 1e9,
        )
    finally:
        env.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--tiny", action="store_true", help="tiny sizes: check the code path")
    options = parser.parse_args(argv)
    part_tag_baseline(options.backend, options.tiny)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
