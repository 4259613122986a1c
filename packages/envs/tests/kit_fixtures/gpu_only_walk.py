"""The kit's walk with a step that passes every check on cpu and sim but does not build for a GPU.

The step keeps its move in a scratch array made with ``np.zeros`` inside the kernel:
fine for Numba's cpu target and the simulator (numpy), rejected by numba-cuda (no
allocation in a CUDA kernel), so only the ``gpu_compile`` check can find it.
"""

import dataclasses

import numpy as np

from kernelgym.core import env_kernel, rng
from kit_fixtures import walk


@env_kernel
def step_with_scratch(i, actions, rng_states, reset_mask, obs, rewards, terminated, position, energy,
                      goal, start_range, goal_reward, step_cost):
    """BUG (GPU only): allocates inside the kernel."""
    scratch = np.zeros(1, np.int64)
    scratch[0] = actions[i] - 1
    if reset_mask[i]:
        position[i] = rng.randint(rng_states, i, 2 * start_range + 1) - start_range
        energy[i] = 0.0
        rewards[i] = 0.0
        terminated[i] = False
    else:
        move = scratch[0]
        position[i] += move
        energy[i] = 0.9 * energy[i] + 0.1 * abs(move)
        done = abs(position[i]) >= goal
        terminated[i] = done
        rewards[i] = goal_reward if done else -step_cost
    obs[i, 0] = position[i] / goal
    obs[i, 1] = energy[i]


SPEC = dataclasses.replace(walk.SPEC, id="WalkScratch-v0", step_kernel=f"{__name__}:step_with_scratch")
