"""The loop each ``VectorSampledTasks`` worker process runs (messages: :mod:`.wire`).

The worker builds its samplers, answers ``(OK, None)`` once they are made, then serves
one ``SamplerGroup`` command per message until ``close`` or until the parent goes away.
It is started by :func:`kernelgym.collectors.processes.start_process`, so it ignores
SIGINT and dies with its parent.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from multiprocessing.connection import Connection

import cloudpickle

from kernelgym.collectors.sampler_group import SamplerFailure, SamplerFailures, SamplerGroup
from kernelgym.collectors.wire import FAILED, OK, PackedArray, encode_reply, pack_results, portable_failures


def worker_main(
    connection: Connection, payload: bytes, first_index: int, auto_resample_when_done: bool, active: Sequence[int]
) -> None:
    """Build the samplers ``cloudpickle.loads(payload)`` describes, then serve commands."""
    try:
        make_sampler_fn, sampler_fn_args = cloudpickle.loads(payload)
        group = SamplerGroup(make_sampler_fn, sampler_fn_args, first_index, auto_resample_when_done, active)
    except SamplerFailures as exc:
        connection.send_bytes(encode_reply((FAILED, portable_failures(exc.failures))))
        return
    except Exception as exc:
        connection.send_bytes(encode_reply((FAILED, portable_failures([SamplerFailure(None, exc)]))))
        return
    connection.send_bytes(encode_reply((OK, None)))
    while True:
        try:
            message = connection.recv_bytes()
        except (EOFError, OSError):  # the parent closed its end or died
            return
        command = None
        try:
            command, args = pickle.loads(message)
            if command not in SamplerGroup.COMMANDS:
                raise ValueError(f"command must be one of {sorted(SamplerGroup.COMMANDS)}, got {command!r}")
            if command == "step" and type(args[0]) is PackedArray:
                args = (args[0].unpack(),)
            value = getattr(group, command)(*args)
            reply = (OK, pack_results(value) if command == "step" and value else value)
        except SamplerFailures as exc:
            reply = (FAILED, portable_failures(exc.failures))
        except Exception as exc:
            reply = (FAILED, portable_failures([SamplerFailure(None, exc)]))
        try:
            connection.send_bytes(encode_reply(reply))
        except (BrokenPipeError, OSError):
            return
        if command == "close":
            return
