"""Argument errors of the `kernelgym` command are found before any plugin or heavy module loads.

Each case runs the command in a fresh interpreter and asserts the exit code 2, a message
naming the argument, the expected and the received value, and that neither an env plugin
nor torch, numba or the kit's checks were imported to find the error (what made these
errors take 18-24 s). How long they take is measured in benchmarks/bench_make_time.py.
"""

import json
import os
import pathlib
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points

import pytest

from kernelgym.envs.hookspecs import ENTRY_POINT_GROUP

ROOT = pathlib.Path(__file__).resolve().parents[1]

# run main(argv) and report its exit code and which heavy modules it imported
PROBE = textwrap.dedent("""
    import json, sys
    from kernelgym.cli.main import main
    try:
        code = main(sys.argv[1:])
    except SystemExit as exit_:
        code = exit_.code
    heavy = ("torch", "numba", "kernelgym.core", "hypothesis", "kernelgym.envs.testing.checks")
    plugins = {entry_point.value.partition(":")[0] for entry_point in __import__(
        "importlib.metadata").metadata.entry_points(group="kernelgym.envs")}
    loaded = sorted(name for name in (*heavy, *plugins) if name in sys.modules)
    print(json.dumps({"code": code, "loaded": loaded}))
""")


def run_probe(*argv, env=None):
    environment = {key: value for key, value in os.environ.items() if key != "NUMBA_ENABLE_CUDASIM"}
    completed = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env={**environment, **(env or {})},
    )
    assert completed.stdout.strip(), completed.stderr
    return json.loads(completed.stdout.strip().splitlines()[-1]), completed.stderr


@pytest.mark.parametrize(
    ("argv", "argument", "expected", "received"),
    [
        (["check", "NoSuch-v0"], "argument ENV", "expected one of the registered envs", "'NoSuch-v0'"),
        (["check", "cartpole-v1"], "argument ENV", "did you mean 'CartPole-v1'?", "'cartpole-v1'"),
        (["check", "CartPole-v1", "--checks", "nosuch"], "argument --checks", "expected names among", "['nosuch']"),
        # the documented opt-in fast_math check is accepted: only the wrong name is named
        (
            ["check", "CartPole-v1", "--checks", "fast_math,long_horizon,nosuch"],
            "argument --checks",
            "'fast_math'",
            "received ['nosuch']",
        ),
        (["bench", "NoSuch-v0"], "argument ENV", "expected one of the registered envs", "'NoSuch-v0'"),
        (["demo", "--backend", "sim"], "argument --backend", "NUMBA_ENABLE_CUDASIM=1", "received 'sim'"),
        (["gpu-compile", "NoSuch-v0"], "argument ENV", "'CartPole-v1'", "'NoSuch-v0'"),
        (["compile", "NoSuch-v0"], "argument ENV", "expected one of the registered envs", "'NoSuch-v0'"),
        (["compile", "CartPole-v1", "--backend", "sim"], "argument --backend", "NUMBA_ENABLE_CUDASIM=1", "'sim'"),
        (["compile", "CartPole-v1", "--num-envs", "0"], "argument --num-envs", "an integer >= 1", "'0'"),
        (["compile", "CartPole-v1", "--autoreset-mode", "never"], "argument --autoreset-mode", "'both'", "'never'"),
    ],
)
def test_argument_errors_exit_2_before_plugins_or_heavy_modules_load(argv, argument, expected, received):
    result, stderr = run_probe(*argv)
    assert result["code"] == 2, stderr
    message = stderr.strip().splitlines()[-1]
    assert argument in message and expected in message and received in message, message
    assert result["loaded"] == [], result


def test_version_names_every_installed_distribution_and_loads_nothing_heavy():
    from importlib import metadata

    result, stderr = run_probe("--version")
    assert result == {"code": 0, "loaded": []}, stderr
    completed = subprocess.run(
        [sys.executable, "-m", "kernelgym.cli", "--version"], capture_output=True, text=True, timeout=300
    )
    lines = completed.stdout.splitlines()
    version = (ROOT / "VERSION").read_text().strip()
    assert completed.returncode == 0 and lines[0] == f"kernelgym {version}", completed.stdout
    assert f"  kernelgym-core {version}" in lines and f"  numba {metadata.version('numba')}" in lines, lines


def test_a_plugin_that_declares_no_ids_is_loaded_before_an_unknown_id_is_refused(tmp_path):
    # its ids are known only from its hook, so the early check must not refuse them
    (tmp_path / "undeclaring.py").write_text(
        textwrap.dedent("""
            import dataclasses
            from kernelgym.envs.classic import cartpole
            from kernelgym.envs.hookspecs import hookimpl

            @hookimpl
            def kernelgym_register_envs():
                return [dataclasses.replace(cartpole.SPEC, id="Undeclared-v0")]
        """)
    )
    info = tmp_path / "undeclaring-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: undeclaring\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[kernelgym.envs]\nundeclaring = undeclaring\n")
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    result, stderr = run_probe("check", "NoSuch-v0", env={"PYTHONPATH": path})
    assert result["code"] == 2, stderr
    assert "'Undeclared-v0'" in stderr and "received 'NoSuch-v0'" in stderr
    assert "undeclaring" in result["loaded"], result


def test_every_installed_plugin_declares_its_ids():
    # the early check relies on it for the plugins kernelgym ships; a fresh process, since
    # a plugin another test registered in this one counts as undeclaring
    code = "from kernelgym.envs.registry import undeclaring_plugins; print(undeclaring_plugins())"
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert entry_points(group=ENTRY_POINT_GROUP)
    assert completed.stdout.strip() == "[]", completed.stdout + completed.stderr


def test_check_names_without_the_kit_are_the_kits_checks():
    from kernelgym.envs.testing import check_names
    from kernelgym.envs.testing.known_checks import CHECK_NAMES

    assert list(CHECK_NAMES) == check_names()
