"""The files the command writes: proven writable before the work, and never lost after it.

``os.access`` is no proof that a file can be written (``/proc``, read-only mounts, ACLs, a
full disk), so an output path is opened for writing at parse time. The result of a long
run is printed before its file is written; a folder removed during the run is made again,
and a file that still cannot be written is written to a temporary folder instead, with a
one-line error (exit code 1) naming the option, not a traceback.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable

__all__ = ["write_problem", "save_output"]


def write_problem(path: str) -> str | None:
    """Why ``path`` cannot be written, found by opening it for writing; None when it can.

    An existing file is opened for appending and left unchanged; a new one is created and
    removed again.
    """
    existed = os.path.lexists(path)
    try:
        with open(path, "ab"):
            pass
    except OSError as error:
        return f"cannot write it: {error.strerror or error}"
    except ValueError as error:  # e.g. an embedded NUL byte
        return f"cannot write it: {error}"
    if not existed:
        try:
            os.remove(path)
        except OSError:
            pass  # a placeholder left behind is overwritten at the end
    return None


def save_output(write: Callable[[str], None], path: str, option: str, command: str, what: str) -> bool:
    """Run ``write(path)``; on failure write to a temporary folder instead and say so on stderr.

    Parameters
    ----------
    write : callable
        Writes the file at the path it is given.
    path : str
        Where the user asked for it (``option``'s value).
    option, command, what : str
        For the messages: e.g. ``"--out"``, ``"demo"``, ``"learning curve"``.

    Returns
    -------
    bool
        True when ``path`` was written.
    """
    folder = os.path.dirname(os.path.abspath(path))
    problem = None
    try:
        if not os.path.isdir(folder):
            os.makedirs(folder)
            print(
                f"kernelgym {command}: the folder {folder!r} of {option} was removed during the run; made it again",
                file=sys.stderr,
            )
        write(path)
        return True
    except (OSError, ValueError) as error:
        problem = getattr(error, "strerror", None) or str(error)
    fallback = os.path.join(tempfile.mkdtemp(prefix=f"kernelgym-{command}-"), os.path.basename(path))
    try:
        write(fallback)
        instead = f"; the {what} was written to {fallback!r} instead"
    except (OSError, ValueError) as error:
        instead = f"; writing it to {fallback!r} failed too ({getattr(error, 'strerror', None) or error})"
    print(
        f"kernelgym {command}: error: argument {option}: could not write {path!r} ({problem}){instead}", file=sys.stderr
    )
    return False
