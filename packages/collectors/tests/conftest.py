"""Fixtures of the collectors tests."""

import multiprocessing

import pytest


@pytest.fixture
def no_leftover_processes():
    """Fail a test that leaves a child process behind (tests opt in with ``usefixtures``)."""
    before = set(multiprocessing.active_children())
    yield
    leftover = [process for process in multiprocessing.active_children() if process not in before]
    for process in leftover:  # do not let one leak fail every later test
        process.kill()
        process.join()
    assert leftover == [], f"child processes left behind: {leftover}"
