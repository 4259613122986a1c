"""A hand-written CUDA C TagGridWorld (WarpDrive's design), compiled at run time with NVRTC.

`tag_gridworld.cu` is the game of kernelgym's ``TagGridWorld-v0`` with
``use_full_observation=False``, written the way WarpDrive writes it: one launch per step,
one block per env, one thread per agent, the tag count in shared memory. It is a benchmark
baseline (benchmarks/gpu_check/tag_baseline.py runs it side by side with kernelgym), not
a backend.

NVRTC comes from NVIDIA's pip wheels through ``cuda.bindings`` (``kernelgym-core[gpu-compile]``
installs them); compiling needs no GPU:

    python benchmarks/tag_cuda_c/baseline.py --arch sm_90    # prints the PTX and cubin sizes
"""

from __future__ import annotations

import argparse
import ctypes
from pathlib import Path

SOURCE = Path(__file__).resolve().with_name("tag_gridworld.cu")
KERNEL = b"tag_gridworld_step"
OBS_SIZE = 6
MAX_AGENTS = 1024  # one thread per agent in one block
# TagGridWorldParams' fields the kernel takes as -D constants (use_full_observation is False)
INT_PARAMS = ("num_taggers", "num_runners", "grid_length", "episode_length")
FLOAT_PARAMS = ("wall_hit_penalty", "tag_reward_for_tagger", "tag_penalty_for_runner", "step_cost_for_tagger")


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as error:
        raise ImportError(
            "the CUDA C baseline compiles with NVRTC through cuda.bindings: "
            f'pip install "kernelgym-core[gpu-compile]" ({error})'
        ) from error
    return nvrtc


def _check_nvrtc(nvrtc, result, what: str) -> None:
    if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise RuntimeError(f"NVRTC {what} failed: {result!r}")


def defines(params) -> list[str]:
    """The ``-D`` options fixing ``params`` (a TagGridWorldParams) in the kernel.

    Floats are written with ``repr``: the shortest text that parses back to the same double.
    """
    if params.use_full_observation:
        raise ValueError("params.use_full_observation: expected False (the baseline has the partial observation only)")
    if params.num_agents > MAX_AGENTS:
        raise ValueError(
            f"params num_agents: expected at most {MAX_AGENTS} (one thread per agent in one block), "
            f"got {params.num_agents}"
        )
    # in parentheses: a negative value after the kernel's unary minus must not read as "--"
    options = [f"-D{name.upper()}=({int(getattr(params, name))})" for name in INT_PARAMS]
    return options + [f"-D{name.upper()}=({float(getattr(params, name))!r})" for name in FLOAT_PARAMS]


def compile_source(params, arch: str, output: str) -> bytes:
    """`tag_gridworld.cu` compiled by NVRTC for ``params``.

    Parameters
    ----------
    params : TagGridWorldParams
        The game; ``use_full_observation`` must be False.
    arch : str
        A real architecture, e.g. ``"sm_90"`` or ``"sm_80"``.
    output : {"ptx", "cubin"}
        PTX (compiled for the virtual ``compute_XX`` of ``arch``) or a cubin for ``arch``.

    Returns
    -------
    bytes
        The PTX text or the cubin image.
    """
    if output not in ("ptx", "cubin"):
        raise ValueError(f"output: expected 'ptx' or 'cubin', got {output!r}")
    if not arch.startswith("sm_") or not arch[3:].isdigit():
        raise ValueError(f"arch: expected a real architecture like 'sm_90', got {arch!r}")
    nvrtc = _nvrtc()
    target = arch if output == "cubin" else f"compute_{arch[3:]}"
    # --fmad=false: kernelgym's cuda build does not contract a * b + c into an fma either
    options = [f"--gpu-architecture={target}", "--fmad=false", "--std=c++17", *defines(params)]
    result, program = nvrtc.nvrtcCreateProgram(SOURCE.read_bytes(), SOURCE.name.encode(), 0, [], [])
    _check_nvrtc(nvrtc, result, "nvrtcCreateProgram")
    try:
        (result,) = nvrtc.nvrtcCompileProgram(program, len(options), [option.encode() for option in options])
        if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _, size = nvrtc.nvrtcGetProgramLogSize(program)
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(program, log)
            raise RuntimeError(f"NVRTC could not compile {SOURCE.name} for {target}: {log.decode(errors='replace')}")
        get_size, get = (
            (nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN)
            if output == "cubin"
            else (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX)
        )
        result, size = get_size(program)
        _check_nvrtc(nvrtc, result, f"{get_size.__name__}")
        image = b" " * size
        (result,) = get(program, image)
        _check_nvrtc(nvrtc, result, f"{get.__name__}")
        return image
    finally:
        nvrtc.nvrtcDestroyProgram(program)


class CudaTagGridWorld:
    """``num_envs`` baseline envs on the current CUDA device (torch arrays), stepped by one launch.

    The arrays have kernelgym's layout: ``obs`` (num_envs, num_agents, 6) float32,
    ``rewards`` (num_envs, num_agents) float32, ``terminated`` and ``truncated`` (num_envs)
    bool; `step` takes kernelgym's int64 actions (num_envs, num_agents) on the device.
    Launches go on torch's current stream, so torch work and the kernel stay ordered.
    """

    def __init__(self, params, num_envs: int):
        import torch
        from cuda.bindings import driver

        if num_envs < 1:
            raise ValueError(f"num_envs: expected an int >= 1, got {num_envs!r}")
        self.params, self.num_envs = params, num_envs
        self._driver = driver
        device = torch.device("cuda", torch.cuda.current_device())
        torch.zeros(1, device=device)  # torch makes the device's primary context current
        major, minor = torch.cuda.get_device_capability(device)
        image = compile_source(params, f"sm_{major}{minor}", "cubin")
        self._module = self._call(driver.cuModuleLoadData(image), "cuModuleLoadData")
        self._function = self._call(driver.cuModuleGetFunction(self._module, KERNEL), "cuModuleGetFunction")
        agents = params.num_agents

        def zeros(*shape, dtype):
            return torch.zeros(shape, dtype=dtype, device=device)

        self.loc_x, self.loc_y = zeros(num_envs, agents, dtype=torch.int32), zeros(num_envs, agents, dtype=torch.int32)
        self.in_game = zeros(num_envs, agents, dtype=torch.bool)
        self.timestep, self.runners_left = zeros(num_envs, dtype=torch.int32), zeros(num_envs, dtype=torch.int32)
        self.done = zeros(num_envs, dtype=torch.bool)
        self.obs = zeros(num_envs, agents, OBS_SIZE, dtype=torch.float32)
        self.rewards = zeros(num_envs, agents, dtype=torch.float32)
        self.terminated, self.truncated = zeros(num_envs, dtype=torch.bool), zeros(num_envs, dtype=torch.bool)
        self._no_actions = zeros(num_envs, agents, dtype=torch.int64)
        # whole warps: the threads past the last agent only pass the barriers
        self._threads = -(-agents // 32) * 32

    def _call(self, answer, what: str):
        result, *values = answer
        if result != self._driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"CUDA driver {what} failed: {result!r}")
        return values[0] if values else None

    def reset(self) -> None:
        """Reset every env (one launch with every done flag set; no actions are read)."""
        self.done.fill_(True)
        self.step(self._no_actions)

    def step(self, actions) -> None:
        """One step of every env (envs done at the last step are reset instead), one launch."""
        import torch

        expected = (self.num_envs, self.params.num_agents)
        if tuple(actions.shape) != expected or actions.dtype != torch.int64 or not actions.is_cuda:
            raise TypeError(
                f"actions: expected a cuda int64 tensor of shape {expected}, "
                f"got {actions.dtype} {tuple(actions.shape)} on {actions.device}"
            )
        actions = actions.contiguous()
        arrays = (
            self.loc_x,
            self.loc_y,
            self.in_game,
            self.timestep,
            self.runners_left,
            self.done,
            actions,
            self.obs,
            self.rewards,
            self.terminated,
            self.truncated,
        )
        pointers = [ctypes.c_void_p(array.data_ptr()) for array in arrays]
        parameters = (ctypes.c_void_p * len(pointers))(*[ctypes.addressof(pointer) for pointer in pointers])
        stream = self._driver.CUstream(torch.cuda.current_stream().cuda_stream)
        self._call(
            self._driver.cuLaunchKernel(
                self._function,
                self.num_envs,
                1,
                1,
                self._threads,
                1,
                1,
                0,
                stream,
                ctypes.addressof(parameters),
                0,
            ),
            "cuLaunchKernel",
        )


def main(argv=None) -> int:
    from kernelgym.envs.tag.gridworld import TagGridWorldParams

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", action="append", default=None, help="sm_XX, repeatable (default sm_80 and sm_90)")
    parser.add_argument("--taggers", type=int, default=999)
    parser.add_argument("--runners", type=int, default=1)
    options = parser.parse_args(argv)
    params = TagGridWorldParams(num_taggers=options.taggers, num_runners=options.runners, use_full_observation=False)
    for arch in options.arch or ["sm_80", "sm_90"]:
        for output in ("ptx", "cubin"):
            print(f"{arch} {output}: {len(compile_source(params, arch, output)):,} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
