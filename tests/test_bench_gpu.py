"""benchmarks/bench_gpu.py: the GPU benchmarks' code path on cpu with tiny N, and a clear
refusal without a GPU (the numbers themselves need a GPU)."""

import pytest
from scripts import load_script


@pytest.fixture(scope="module")
def bench_gpu():
    return load_script("benchmarks/bench_gpu.py")


def test_tiny_run_on_cpu_writes_every_workload(bench_gpu, tmp_path, monkeypatch):
    # the code path and the table, not a rate: the serial builds compile in half the time
    monkeypatch.setenv("KERNELGYM_CPU_THREADS", "one")
    # and its two TagContinuous rows, which differ in params only, share a compile
    monkeypatch.setenv("KERNELGYM_PARAMS", "arguments")
    out = tmp_path / "gpu.md"
    assert bench_gpu.main(["--backend", "cpu", "--tiny", "--repeats", "1", "--out", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("## GPU throughput") and "no GPU: backend 'cpu'" in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and "env-steps/s" not in line]
    assert [row.split(" | ")[0] for row in rows] == ["| CartPole-v1"] * 2 + [
        "| TagContinuous-v0 (WarpDrive: 2.9 M on an A100)",
        "| TagContinuous-v0, 10 nearest observed",
        "| DeviceCollector CartPole-v1, MLP 4-32-2",
    ]
    assert all(float(row.rstrip(" |").rsplit("| ", 1)[1].replace(",", "")) > 0 for row in rows)


def test_without_a_gpu_cuda_is_refused_with_the_reason(bench_gpu, tmp_path, capsys):
    from kernelgym.core.backends import gpu_usable

    if gpu_usable():
        pytest.skip("a GPU is usable here: the refusal path does not apply")
    assert bench_gpu.main(["--out", str(tmp_path / "gpu.md")]) == 2
    assert "backend 'cuda' is unavailable" in capsys.readouterr().err
    assert not (tmp_path / "gpu.md").exists()
