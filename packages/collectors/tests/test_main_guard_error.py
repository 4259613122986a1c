"""A "spawn"/"forkserver" worker that died re-running an unguarded main script: its
``WorkerCrashedError`` names the missing ``if __name__ == "__main__":`` (issue 27), and a
worker that exits with code 1 for another reason is not blamed on the guard."""

import subprocess
import sys
import textwrap

import pytest

UNGUARDED = """
from kernelgym.collectors import GymTaskSampler, VectorSampledTasks

with VectorSampledTasks(GymTaskSampler, [{{"env": "CartPole-v1", "seed": 0}}],
                        multiprocessing_start_method={method!r}) as tasks:
    tasks.step([0])
"""

GUARDED = """
import os
from kernelgym.collectors.processes import crashed_error, get_context, start_process

if __name__ == "__main__":
    process = start_process(get_context({method!r}), os._exit, (1,), name="w")
    process.join()
    print(crashed_error(process, "worker").message)
"""


def run_script(tmp_path, source):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(source))
    return subprocess.run(
        [sys.executable, str(script)], check=False, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_a_child_that_died_rerunning_an_unguarded_script_names_the_main_guard(tmp_path, method):
    result = run_script(tmp_path, UNGUARDED.format(method=method))
    assert result.returncode == 1
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith("kernelgym.collectors.worker_errors.WorkerCrashedError: worker process 0")
    assert "died with exit code 1" in last_line
    assert 'if __name__ == "__main__":' in last_line
    assert str(tmp_path / "script.py") in last_line


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_a_child_of_a_guarded_script_that_exits_with_1_only_reports_the_exit_code(tmp_path, method):
    result = run_script(tmp_path, GUARDED.format(method=method))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "worker died with exit code 1"
