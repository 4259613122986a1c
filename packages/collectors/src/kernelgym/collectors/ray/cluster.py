"""Joining a Ray cluster, and checking that actors can be placed on it before any starts."""

from __future__ import annotations

import math
import numbers
import uuid
from collections.abc import Mapping
from typing import Any

import ray


def connect(address: str | None = None, init_kwargs: Mapping[str, Any] | None = None) -> None:
    """Make sure this process is connected to Ray.

    Parameters
    ----------
    address : str or None
        None: keep the connection this process already has; else join the cluster that
        ``RAY_ADDRESS`` or ``ray start`` on this machine made; else start a local one.
        ``"auto"``: join the running cluster (an error when there is none).
        ``"ray://host:10001"`` or ``"host:6379"``: join that cluster.
    init_kwargs : mapping, optional
        More arguments of ``ray.init`` (e.g. ``num_cpus`` for a local cluster).

    Raises
    ------
    ValueError
        This process is connected to Ray already, but ``address`` names another cluster.
    """
    if address is not None and not isinstance(address, str):
        raise TypeError(f"address: expected a str or None, got {type(address).__name__} {address!r}")
    if ray.is_initialized():
        current = ray.get_runtime_context().gcs_address
        if address not in (None, "auto", current):
            raise ValueError(
                f"address: this process is connected to the Ray cluster at {current!r} already, "
                f"got {address!r}; call ray.shutdown() first to change clusters"
            )
        return
    ray.init(address=address, **dict(init_kwargs or {}))


def check_max_restarts(max_restarts) -> None:
    """Ray's own restart count for actors: an int >= -1 (-1: no limit), else a ValueError naming it."""
    if not isinstance(max_restarts, int) or isinstance(max_restarts, bool) or max_restarts < -1:
        raise ValueError(f"max_restarts must be an int >= -1 (-1: no limit), got {max_restarts!r}")


def check_resources(num_cpus: float, num_gpus: float) -> None:
    """Resources asked for each actor must be finite numbers >= 0 (``nan < 0`` is False: checked apart)."""
    for name, value in (("num_cpus", num_cpus), ("num_gpus", num_gpus)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value < math.inf:
            raise ValueError(f"{name}: expected a number >= 0 (per actor, finite), got {value!r}")


def check_fits(what: str, count: int, num_cpus: float, num_gpus: float) -> None:
    """Fail at once, naming the argument, when ``count`` actors could never be placed.

    Ray would otherwise keep an actor pending until resources appear, which on a cluster
    without autoscaling is forever.
    """
    total = ray.cluster_resources()
    for name, resource, value in (("num_cpus", "CPU", num_cpus), ("num_gpus", "GPU", num_gpus)):
        have = total.get(resource, 0.0)
        if value * count > have + 1e-9:
            raise ValueError(
                f"{name}: {count} {what} x {value} {resource} each need {value * count:g} {resource}, "
                f"but the Ray cluster has {have:g}"
                + (" (no GPU: start Ray on nodes with GPUs, or ask for num_gpus=0)" if resource == "GPU" else "")
            )


def actor_names(kind: str, count: int) -> list[str]:
    """Unique names for ``count`` actors (``ray list actors`` shows them; ``close`` is checked by them)."""
    run = uuid.uuid4().hex[:8]
    return [f"kernelgym-{kind}-{run}-{index}" for index in range(count)]
