"""Library diagnostics go through `logging`: the backend ``auto`` chose, and launcher compiles."""

from __future__ import annotations

import logging
import random

import numpy as np

from kernelgym.core import backends, env_kernel


def test_auto_logs_the_backend_it_chose_and_why(caplog):
    backends._log_auto_choice.cache_clear()  # logged once per process and outcome
    with caplog.at_level(logging.INFO, logger="kernelgym.core.backends"):
        chosen = backends.resolve_backend("auto")
        backends.resolve_backend("auto")  # launches resolve it every call: logged once
    records = [record for record in caplog.records if record.name == "kernelgym.core.backends"]
    assert len(records) == 1 and records[0].levelno == logging.INFO
    reason = backends.gpu_unavailable_reason()
    assert records[0].getMessage() == f"backend 'auto' chose {chosen!r}: {reason or 'a usable CUDA GPU was found'}"


def test_an_explicit_backend_logs_nothing(caplog):
    with caplog.at_level(logging.DEBUG, logger="kernelgym.core.backends"):
        assert backends.resolve_backend("cpu") == "cpu"
    assert not [record for record in caplog.records if record.name == "kernelgym.core.backends"]


def test_a_launcher_compile_is_logged_with_its_time(caplog):
    # a captured value the body's key includes: a new launcher in every run, so it really
    # compiles (a cached one would load from Numba's cache, which Numba does not announce)
    step = random.random()

    @env_kernel
    def add_step(i, x):
        x[i] += step

    x = np.zeros(3)
    with caplog.at_level(logging.DEBUG, logger="kernelgym.core.compile_log"):
        add_step.launch("cpu", 3, x)
        add_step.launch("cpu", 3, x)  # compiled already: no second record
    assert np.allclose(x, 2 * step)
    infos = [record.getMessage() for record in caplog.records if record.levelno == logging.INFO]
    assert len(infos) == 1, infos
    assert "add_step" in infos[0] and "cpu_launcher for 2 arguments" in infos[0]
    seconds = float(infos[0].split(" in ")[-1].split(" s ")[0])
    assert seconds > 0
    debugs = [record.getMessage() for record in caplog.records if record.levelno == logging.DEBUG]
    assert any("array(float64, 1d, C)" in message for message in debugs)
