"""The loop each ``VectorSampledTasks`` worker process runs (messages: `wire`).

The worker builds its samplers, answers ``(OK, None)`` once they are made, then serves
one ``SamplerGroup`` command per message until ``close`` or until the parent goes away.
It is started by `kernelgym.collectors.processes.start_process`, so it ignores
SIGINT and dies with its parent.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from multiprocessing.connection import Connection

import cloudpickle

from kernelgym.collectors.sampler_group import SamplerFailure, SamplerFailures, SamplerGroup
from kernelgym.collectors.wire import FAILED, OK, PackedArray, encode_reply, pack_results, portable_failures


def start_group(
    payload: bytes, first_index: int, auto_resample_when_done: bool, active: Sequence[int]
) -> tuple[SamplerGroup | None, tuple]:
    """Build the samplers ``cloudpickle.loads(payload)`` describes: (the group, or None, and the startup reply)."""
    try:
        make_sampler_fn, sampler_fn_args = cloudpickle.loads(payload)
        return SamplerGroup(make_sampler_fn, sampler_fn_args, first_index, auto_resample_when_done, active), (OK, None)
    except SamplerFailures as exc:
        return None, (FAILED, portable_failures(exc.failures))
    except Exception as exc:
        return None, (FAILED, portable_failures([SamplerFailure(None, exc)]))


def serve(group: SamplerGroup | None, message: bytes) -> tuple[str | None, tuple]:
    """Run one encoded ``SamplerGroup`` command: (the command, None if unreadable, and its reply).

    A failure is the reply, never an exception: the caller answers every message (a group
    that failed to start, None, fails every command).
    """
    command = None
    try:
        command, args = pickle.loads(message)
        if command not in SamplerGroup.COMMANDS:
            raise ValueError(f"command must be one of {sorted(SamplerGroup.COMMANDS)}, got {command!r}")
        if command == "step" and type(args[0]) is PackedArray:
            args = (args[0].unpack(),)
        value = getattr(group, command)(*args)
        return command, (OK, pack_results(value) if command == "step" and value else value)
    except SamplerFailures as exc:
        return command, (FAILED, portable_failures(exc.failures))
    except Exception as exc:
        return command, (FAILED, portable_failures([SamplerFailure(None, exc)]))


def worker_main(
    connection: Connection, payload: bytes, first_index: int, auto_resample_when_done: bool, active: Sequence[int]
) -> None:
    """Build the samplers ``cloudpickle.loads(payload)`` describes, then serve commands."""
    group, startup = start_group(payload, first_index, auto_resample_when_done, active)
    connection.send_bytes(encode_reply(startup))
    if group is None:
        return
    while True:
        try:
            message = connection.recv_bytes()
        except (EOFError, OSError):  # the parent closed its end or died
            return
        command, reply = serve(group, message)
        try:
            connection.send_bytes(encode_reply(reply))
        except (BrokenPipeError, OSError):
            return
        if command == "close":
            return
