"""benchmarks/bench_minatar.py: the table's gymnax columns from given cell results, and
--gymnax-python refused clearly before any kernel runs (no jax here: gymnax runs in its own venv)."""

import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scripts import load_script

SIZES = [1, 64, 4096, 65536]
GYMNAX = {"gymnax": "1.0.1", "jax": "0.10.2", "scan_steps": {1: 1024, 64: 1024, 4096: 32, 65536: 2}}


@pytest.fixture(scope="module")
def bench():
    return load_script("benchmarks/bench_minatar.py")


def rows(text: str) -> list[list[str]]:
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in line.strip("| ").split(" | ")] for line in lines]


rounds = st.lists(st.floats(1.0, 1e9), min_size=1, max_size=3)


@settings(max_examples=25, deadline=None)
@given(kernelgym=st.lists(rounds, min_size=4, max_size=4), gymnax=st.lists(rounds, min_size=4, max_size=4))
def test_gymnax_columns_hold_the_medians_and_the_ratio_at_4096(bench, kernelgym, gymnax):
    rates = {("Breakout", "original"): [1e4]}
    for n, kernel_rates, gymnax_rates in zip(SIZES, kernelgym, gymnax):
        rates[("Breakout", n)] = kernel_rates
        rates[("Breakout", "gymnax", n)] = gymnax_rates
    text = bench.table(rates, ["Breakout"], SIZES, {"Breakout": 672}, 5e9, 3, 1.0, GYMNAX)
    header, row = rows(text)
    assert header[2:10] == [f"N = {n:,}" for n in SIZES] + [f"gymnax N = {n:,}" for n in SIZES]
    assert header[-1] == "x gymnax at N = 4,096"
    assert row[6:10] == [f"{statistics.median(values):,.0f}" for values in gymnax]
    assert row[-1] == f"{statistics.median(kernelgym[2]) / statistics.median(gymnax[2]):,.1f}"
    assert "gymnax 1.0.1 (jax 0.10.2" in text and "T = 1,024 at N = 1" in text


def test_a_gymnax_cell_not_measured_is_a_dash_and_without_gymnax_the_columns_are_as_before(bench):
    rates = {("Seaquest", "original"): [3e4], ("Seaquest", 64): [5e5], ("Seaquest", 4096): [6e5]}
    rates |= {("Seaquest", "gymnax", 64): [3e3], ("Seaquest", "gymnax", 4096): [None]}  # the process died
    info = {**GYMNAX, "scan_steps": {64: 1024}}
    text = bench.table(rates, ["Seaquest"], [64, 4096], {"Seaquest": 2834}, 5e9, 1, 1.0, info, (0.24, 1.5))
    header, row = rows(text)
    assert row[4:6] == ["3,000", "—"] and row[-1] == "—"
    assert "Load average (1 min) at the start and the end: 0.2, 1.5." in text
    header, row = rows(bench.table(rates, ["Seaquest"], [64, 4096], {"Seaquest": 2834}, 5e9, 1, 1.0))
    assert header == [
        "game",
        "original (1 env)",
        "N = 64",
        "N = 4,096",
        "bytes/step",
        "GB/s at the largest N",
        "x original at the largest N",
    ]
    assert row == ["Seaquest", "30,000", "500,000", "600,000", "2,834", "1.70", "20"]


def test_gymnax_python_not_executable_is_refused_before_any_kernel(bench, tmp_path, capsys):
    with pytest.raises(SystemExit):
        bench.main(["--gymnax-python", str(tmp_path / "missing"), "--out", str(tmp_path / "m.md")])
    assert "--gymnax-python: expected an executable python" in capsys.readouterr().err
    assert not (tmp_path / "m.md").exists()


def test_a_gymnax_python_that_ends_at_start_is_named(bench, tmp_path):
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\necho 'No module named gymnax' >&2\nexit 1\n")
    python.chmod(0o755)
    with pytest.raises(RuntimeError, match="the gymnax process ended at start"):
        bench.main(["--gymnax-python", str(python), "--out", str(tmp_path / "m.md")])
