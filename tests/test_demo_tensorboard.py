"""`kernelgym demo --tensorboard DIR`: TensorBoard scalars, read back with tensorboard's reader."""

from __future__ import annotations

import sys

import pytest

from kernelgym.cli.main import main

SCALARS = {"charts/mean_return", "charts/env_steps_per_s", "losses/policy", "losses/value", "losses/entropy"}


def run(capsys, *argv):
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = exit_.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_demo_writes_tensorboard_scalars(capsys, tmp_path):
    logdir = tmp_path / "runs" / "demo"  # made by the writer
    # the same short run as tests/test_cli.py's demo test: its kernels are compiled already
    code, out, err = run(
        capsys,
        "demo",
        "--max-env-steps",
        "8192",
        "--num-envs",
        "32",
        "--no-progress",
        "--backend",
        "cpu",
        "--out",
        str(tmp_path / "curve.png"),
        "--tensorboard",
        str(logdir),
    )
    assert code == 1, err  # 8192 steps cannot reach the target
    assert f"TensorBoard scalars written to {logdir}" in out
    # imported here: tox envs without the tensorboard extra (gpu-compile) still collect this module
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(logdir))
    events.Reload()
    assert set(events.Tags()["scalars"]) == SCALARS
    steps = [event.step for event in events.Scalars("charts/mean_return")]
    assert steps == sorted(steps) and steps[-1] == 8192 and len(steps) >= 2
    assert all(event.value > 0 for event in events.Scalars("charts/env_steps_per_s"))
    assert all(event.value >= 0 for event in events.Scalars("losses/value"))


def test_tensorboard_without_the_package_names_the_option_and_the_extra(capsys, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # `import tensorboard` raises ImportError
    code, _, err = run(capsys, "demo", "--tensorboard", str(tmp_path))
    assert code == 2
    assert "argument --tensorboard" in err and "kernelgym[tensorboard]" in err


def test_tensorboard_refuses_a_file(capsys, tmp_path):
    path = tmp_path / "events.txt"
    path.write_text("")
    code, _, err = run(capsys, "demo", "--tensorboard", str(path))
    assert code == 2
    assert "argument --tensorboard" in err and "expected a folder" in err and repr(str(path)) in err


@pytest.mark.parametrize("argv", [["demo"], ["demo", "--no-progress"]])
def test_tensorboard_is_off_by_default(argv):
    from kernelgym.cli.main import build_parser

    assert build_parser().parse_args(argv).tensorboard is None
