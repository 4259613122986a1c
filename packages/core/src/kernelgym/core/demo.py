"""A tiny tour of kernelgym.core: ``python -m kernelgym.core.demo [--backend cpu|sim|cuda|auto]``.

Registers per-env arrays, runs a write-once kernel that moves random walkers, marks the
envs that left the box as done, and resets exactly those envs on the device.
"""

from __future__ import annotations

import argparse

import numpy as np

from kernelgym.core import CUDADataManager, DataFeed, FunctionManager, env_kernel, rng


@env_kernel
def random_walk(env, position, rng_states, done, timestep, step_size, box):
    position[env] += rng.uniform_range(rng_states, env, -step_size, step_size)
    timestep[env] += 1
    if abs(position[env]) > box:
        done[env] = 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default=None, help="cuda, cpu, sim or auto (default: $KERNELGYM_BACKEND or auto)")
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args(argv)

    data_manager = CUDADataManager(num_agents=1, num_envs=options.num_envs, episode_length=100, backend=options.backend)
    feed = DataFeed()
    feed.add_data("position", np.zeros(options.num_envs), save_copy_and_apply_at_reset=True)
    feed.add_data("rng_states", rng.seed_streams(options.seed, options.num_envs))
    data_manager.push_data_to_device(feed, torch_accessible=False)
    data_manager.add_meta_info({"step_size": 1.0, "box": 1.0})

    functions = FunctionManager(data_manager)
    functions.register("random_walk", random_walk)
    step = functions.bind("random_walk", "position", "rng_states", "_done_", "_timestep_", "step_size", "box")
    np.set_printoptions(precision=3, suppress=True)
    print(f"backend: {data_manager.backend}, {options.num_envs} envs, {options.steps} steps")
    for _ in range(options.steps):
        step()
    print("position after steps:", data_manager.pull_data_from_device("position"))
    print("timestep:            ", data_manager.pull_data_from_device("_timestep_"))
    done = data_manager.pull_data_from_device("_done_").astype(bool)
    print("done (|x| > box):    ", np.flatnonzero(done))
    data_manager.reset_done_envs()
    print("after reset_done_envs (on the device, done envs only):")
    print("position:            ", data_manager.pull_data_from_device("position"))
    print("timestep:            ", data_manager.pull_data_from_device("_timestep_"))
    print("done:                ", np.flatnonzero(data_manager.pull_data_from_device("_done_")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
