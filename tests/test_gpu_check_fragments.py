"""benchmarks/gpu_check/fragments.py: the captured-fragment measurement's code path on cpu
(tiny N), where capture is unavailable and says why; every line names the commit."""

import json

import pytest
from scripts import load_script


@pytest.fixture(scope="module")
def fragments():
    return load_script("benchmarks/gpu_check/fragments.py")


def test_tiny_cpu_run_measures_eager_and_reports_captured_unavailable(fragments, capsys, monkeypatch):
    monkeypatch.setattr(fragments, "COMMIT", "0123abc")
    fragments.part_fragments("cpu", tiny=True)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(line["part"], line["path"]) for line in lines] == [
        ("fragments", "eager"),
        ("fragments", "captured"),
        ("fragments_env", "eager"),
        ("fragments_env", "captured"),
    ]
    assert all(line["commit"] == "0123abc" and line["envs"] == 64 for line in lines)
    eager = [line for line in lines if line["path"] == "eager"]
    assert all(0 < line["host_us_per_step"] <= line["us_per_step_with_final_sync"] for line in eager)
    captured = [line for line in lines if line["path"] == "captured"]
    assert all(line["available"] is False for line in captured)
    assert captured[0]["reason"] == "the env's backend is 'cpu': CUDA graphs capture cuda work only"
    assert "expected an env on backend 'cuda', got 'cpu'" in captured[1]["reason"]


def test_the_commit_comes_from_the_environment_or_git(fragments, monkeypatch):
    monkeypatch.setenv("KERNELGYM_COMMIT", "feedbeef")
    assert fragments.commit() == "feedbeef"
    monkeypatch.delenv("KERNELGYM_COMMIT")
    head = fragments.commit()
    assert len(head.split("+")[0]) == 40 or head.startswith("unknown (")
