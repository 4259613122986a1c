"""`kernelgym gpu-compile` for Tag at WarpDrive's 1,000 agents (no GPU needed).

The CLI compiles each env at its default params (11 agents); this runs both Tag envs at
1,000 agents (bench_tag.py's configurations: TagGridWorld 999 taggers and 1 runner, partial
observation; TagContinuous 1 tagger and 999 runners, K = 10) on the cpu backend, 2 envs,
both autoreset modes, then compiles every kernel they launched with NVVM and ptxas for
sm_80 and sm_90a and prints registers, the PTX audit, occupancy at the configured launch
(an env per block of 256 threads that stride over its agents) and launches per step.

    python3 -m tox -e gpu-compile --notest
    .tox/gpu-compile/bin/python tools/gpu_compile_tag_scale.py [ENV ...]

Exit code 1 on a compile error, audit finding or launch that does not fit.
"""

import sys

from kernelgym.core.gpu_compile import (
    LauncherRecorder,
    format_failures,
    format_step_launches,
    format_table,
    require_toolchain,
)
from kernelgym.envs.testing.gpu_compile import run_env_workloads

AGENTS = 1_000
CONFIGURATIONS = {
    "TagGridWorld-v0": {"num_taggers": AGENTS - 1, "num_runners": 1, "use_full_observation": False},
    "TagContinuous-v0": {
        "num_taggers": 1,
        "num_runners": AGENTS - 1,
        "use_full_observation": False,
        "num_other_agents_observed": 10,
    },
}


def main(env_ids) -> int:
    unknown = [env_id for env_id in env_ids if env_id not in CONFIGURATIONS]
    if unknown:
        raise SystemExit(f"ENV: expected some of {sorted(CONFIGURATIONS)}, got {unknown}")
    require_toolchain()
    recorder = LauncherRecorder()
    for env_id in env_ids or CONFIGURATIONS:
        run_env_workloads(recorder, env_id, params=CONFIGURATIONS[env_id], num_envs=2, steps=1, keep_going=True)
    builds = recorder.compile()
    print(format_table(builds))
    print("\nLaunches per env step\n")
    print(format_step_launches(recorder.steps))
    failures = format_failures(builds, recorder.failures)
    if failures:
        print(f"\nFAILED:\n{failures}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
