"""A built-in env's serial twin, compiled with copy propagation (`kernelgym.core.copy_propagation`),
holds fewer reference-count calls than numba's serial pipeline makes of the same launcher: the
copies the inlined bodies make of the launcher's arrays are gone (4-5x CartPole's serial step,
BENCHMARKS.md)."""

import numba
import numpy as np

import kernelgym.envs as kge
from kernelgym.core.copy_propagation import CopyPropagatingCompiler


def _reference_count_calls(llvm_ir: str) -> int:
    return llvm_ir.count("call void @NRT_incref") + llvm_ir.count("call void @NRT_decref")


def test_the_serial_twin_compiles_without_the_copies_numbas_serial_pipeline_keeps(monkeypatch):
    monkeypatch.setenv("KERNELGYM_CPU_THREADS", "one")
    env = kge.make("MountainCar-v0", 8, backend="cpu", seed=0)
    env.reset()
    env.step(np.ones(8, dtype=np.int64))  # a cpu step compiles at its first launch
    launcher = env._launch_step.func
    assert launcher.py_func.__name__ == "cpu_serial_launcher"
    signature = launcher.signatures[0]
    # the generated launcher may come from the disk cache, whose builds hold no LLVM IR:
    # both pipelines compile its source here
    plain = numba.njit(error_model="numpy")(launcher.py_func)
    propagated = numba.njit(error_model="numpy", pipeline_class=CopyPropagatingCompiler)(launcher.py_func)
    plain.compile(signature)
    propagated.compile(signature)
    assert _reference_count_calls(propagated.inspect_llvm(signature)) < _reference_count_calls(
        plain.inspect_llvm(signature)
    )
    env.close()
