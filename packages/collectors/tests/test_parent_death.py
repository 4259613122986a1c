"""What a sampler started in a worker dies with the worker's parent (issue 36, class 4): the worker's
process group goes with it, whether the parent is SIGKILLed or leaves by ``os._exit``."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest
from test_faults import pid_gone, wait_gone

PARENT = textwrap.dedent(
    """
    import os, signal, sys, time
    sys.path.insert(0, {tests!r})
    from test_faults import FaultSampler, SPAWN_AND_HANG
    from kernelgym.collectors import VectorSampledTasks

    tasks = VectorSampledTasks(FaultSampler, [{{"sampler_id": i}} for i in range(2)],
                               multiprocessing_start_method={method!r}, max_processes=2)
    tasks.async_step([(SPAWN_AND_HANG, {pid_file!r}), 0])
    while not os.path.exists({pid_file!r}) or not open({pid_file!r}).read():
        time.sleep(0.05)
    print(*tasks.worker_pids, flush=True)
    {leave}
    """
)
LEAVE = {"SIGKILL": "os.kill(os.getpid(), signal.SIGKILL)", "os._exit": "os._exit(3)"}


@pytest.mark.parametrize("method", ["fork", "forkserver"])
@pytest.mark.parametrize("how", sorted(LEAVE))
def test_a_samplers_subprocess_dies_with_the_workers_parent(tmp_path, method, how):
    pid_file = tmp_path / "grandchild.pid"
    script = PARENT.format(tests=os.path.dirname(__file__), method=method, pid_file=str(pid_file), leave=LEAVE[how])
    with open(tmp_path / "out", "w+") as out:  # a file: an orphan holding a pipe would block run()
        parent = subprocess.run([sys.executable, "-c", script], stdout=out, stderr=subprocess.STDOUT, timeout=120)
        out.seek(0)
        lines = out.read().splitlines()
    assert parent.returncode == (-signal.SIGKILL if how == "SIGKILL" else 3), lines
    grandchild = int(pid_file.read_text())
    workers = [int(pid) for pid in lines[0].split()]
    left = wait_gone([grandchild, *workers], seconds=5.0)
    for pid in left:  # never leave a sleeping orphan behind, even when the test fails
        os.kill(pid, signal.SIGKILL)
    assert left == [], f"outlived the parent: {left} (grandchild {grandchild}, workers {workers})"
    assert pid_gone(grandchild)
