"""The child process of `kernelgym.envs.testing.beside`: run one check of the kit, write its result.

    python -m kernelgym.envs.testing.beside_child FOLDER

``FOLDER/request.pickle`` holds the env, params, precision, tolerances, examples, seed and the
check's name; the `CheckResult` is written to ``FOLDER/<check>.json`` (`write_result`).
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys

from kernelgym.envs.testing.beside import write_result
from kernelgym.envs.testing.checks import CHECKS, CheckConfig
from kernelgym.envs.testing.harness import EnvHarness
from kernelgym.envs.testing.runner import _run_one


def _child(argv=None) -> int:
    """The child process: run one check of the kit and write its `CheckResult` as JSON."""
    parser = argparse.ArgumentParser(description="internal: run one check of the kit")
    parser.add_argument("folder")
    folder = parser.parse_args(argv).folder
    with open(os.path.join(folder, "request.pickle"), "rb") as file:
        request = pickle.load(file)
    harness = EnvHarness(
        request["env"],
        request["backend"],
        params=request["params"],
        rtol=request["rtol"],
        atol=request["atol"],
        precision=request["precision"],
    )
    config = CheckConfig(max_examples=request["max_examples"], seed=request["seed"])
    check = next(check for check in CHECKS if check.name == request["check"])
    write_result(folder, _run_one(check, harness, config))
    return 0


if __name__ == "__main__":
    sys.exit(_child())
