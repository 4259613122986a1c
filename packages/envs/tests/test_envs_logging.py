"""envs' diagnostics through `logging`, and the compile-progress line on every backend's event bus."""

from __future__ import annotations

import logging

import kernelgym.envs as kge
from kernelgym.envs.testing.progress import compile_progress


def test_make_logs_the_env_it_made(caplog):
    with caplog.at_level(logging.INFO, logger="kernelgym.envs.registry"):
        env = kge.make("CartPole-v1", 3, backend="cpu", seed=7)
    env.close()
    messages = [record.getMessage() for record in caplog.records if record.name == "kernelgym.envs.registry"]
    assert messages == ["made CartPole-v1: 3 envs on backend 'cpu', float64, autoreset NextStep, seed 7"]


def test_compile_progress_listens_on_the_cuda_event_bus_too(capsys):
    # numba-cuda's event bus takes only its own Listener class and its own event kind
    # ("numba-cuda:compile"): registering numba's listener there raised before any check ran
    with compile_progress("Walk-v0", "cuda", "parity"):
        pass
    assert capsys.readouterr().err == ""  # nothing compiled: nothing said
