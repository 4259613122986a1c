"""A real local Ray cluster for the ``test_ray_*`` modules (``tox -e ray`` runs them).

Without the optional ``ray`` extra these modules are skipped, unless
``KERNELGYM_REQUIRE_RAY`` is set (the ``ray`` tox env sets it, so there they always run).
"""

import os
import time

import pytest

if os.environ.get("KERNELGYM_REQUIRE_RAY"):
    import ray
else:
    ray = pytest.importorskip("ray", reason="needs the optional `ray` extra (tox -e ray runs these tests)")

TESTS = os.path.dirname(os.path.abspath(__file__))
#: logical CPUs of the test cluster: Ray counts them, the machine may have fewer cores
CLUSTER_CPUS = 4


def start_local_ray() -> None:
    """Start one local Ray cluster per test session (Ray shuts it down at exit)."""
    if ray.is_initialized():
        return
    # the actors' processes import the test modules' samplers and actors by name
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [TESTS, os.environ.get("PYTHONPATH")]))
    ray.init(num_cpus=CLUSTER_CPUS, include_dashboard=False, logging_level="WARNING", log_to_driver=False)


def live_actor_names() -> set[str]:
    """Names of the named actors Ray reports alive, in every namespace."""
    return {entry["name"] for entry in ray.util.list_named_actors(all_namespaces=True)}


def eventually(condition, timeout: float = 20.0) -> bool:
    """Whether ``condition()`` holds within ``timeout`` s (Ray reaps a killed actor's
    process after it reports the actor dead)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
