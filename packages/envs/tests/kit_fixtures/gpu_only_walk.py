"""The kit's walk with a step that passes every check on cpu and sim but does not build for a GPU.

The step keeps its move in a scratch array made with ``np.zeros`` inside the kernel:
fine for Numba's cpu target and the simulator (numpy), rejected by numba-cuda (no
allocation in a CUDA kernel), so only the ``gpu_compile`` check can find it.
"""

import numpy as np

from kernelgym.core import env_kernel
from kit_fixtures import walk


@env_kernel
def step_with_scratch(i, actions, obs, rewards, terminated, position, energy, goal, goal_reward, step_cost):
    """BUG (GPU only): allocates inside the kernel."""
    scratch = np.zeros(1, np.int64)
    scratch[0] = actions[i] - 1
    move = scratch[0]
    position[i] += move
    energy[i] = 0.9 * energy[i] + 0.1 * abs(move)
    done = abs(position[i]) >= goal
    terminated[i] = done
    rewards[i] = goal_reward if done else -step_cost
    obs[i, 0] = position[i] / goal
    obs[i, 1] = energy[i]


SPEC = walk._spec("WalkScratch-v0", step_kernel=step_with_scratch)
