"""The kit's walk with a step that divides by zero in some states.

The energy update scales the move by the size of the walker's direction from the origin,
``position / |position|``: 1 everywhere but at the origin, where it is 0 / 0 = NaN, and
the energy (and the observation that shows it) becomes NaN. A GPU writes these silently, and so do the cpu and sim
twins (numba's numpy error model); the kit must find them and name the kernel's line.

- `DIVIDES_BY_ZERO` (planted bug): the reference is the correct walk's, finite everywhere.
- `RESET_DIVIDES_BY_ZERO` (planted bug): the same in the reset, for starts at the origin.
- `SHARED_NAN`: the reference divides the same way, so kernel and reference agree (NaN
  against NaN is no disagreement), but the NaN observation is still a finding.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from kernelgym.core import env_kernel, rng
from kernelgym.envs.spec import CPUReference
from kit_fixtures import walk


@env_kernel
def step_divides_by_position(i, actions, obs, rewards, terminated, position, energy, goal, goal_reward, step_cost):
    """BUG: the direction from the origin divides by the distance to it, 0 in some states."""
    move = actions[i] - 1
    position[i] += move
    direction = position[i] / abs(position[i])
    energy[i] = 0.9 * energy[i] + 0.1 * abs(move) * abs(direction)
    done = abs(position[i]) >= goal
    terminated[i] = done
    rewards[i] = goal_reward if done else -step_cost
    obs[i, 0] = position[i] / goal
    obs[i, 1] = energy[i]


@env_kernel
def reset_divides_by_position(i, rng_states, obs, position, energy, goal, start_range):
    """BUG: the start energy is 0 written as ``position / position - 1``: NaN at the origin."""
    position[i] = rng.randint(rng_states, i, 2 * start_range + 1) - start_range
    energy[i] = position[i] / position[i] - 1.0
    obs[i, 0] = position[i] / goal
    obs[i, 1] = energy[i]


def reference_step_divides(params, state, action, rng_states=None):
    """The same division by zero as the kernel, with the GPU's result (NaN)."""
    move = int(action) - 1
    position = int(state["position"]) + move
    with np.errstate(invalid="ignore"):
        direction = np.float64(position) / np.float64(abs(position))
    energy = np.float32(0.9 * float(state["energy"]) + 0.1 * abs(move) * abs(direction))
    terminated = abs(position) >= params.goal
    reward = params.goal_reward if terminated else -params.step_cost
    return {"position": np.int32(position).reshape(()), "energy": energy.reshape(())}, reward, terminated


DIVIDES_BY_ZERO = walk._spec("WalkDividesByZero-v0", step_kernel=step_divides_by_position)
RESET_DIVIDES_BY_ZERO = walk._spec("WalkResetDividesByZero-v0", reset_kernel=reset_divides_by_position)
SHARED_NAN = dataclasses.replace(
    walk._spec("WalkSharedNaN-v0", step_kernel=step_divides_by_position),
    reference=CPUReference(walk.reference_reset, reference_step_divides, walk.reference_observe),
)
# the lines of the divisions, which a finding must name
DIVISION_LINE = "direction = position[i] / abs(position[i])"
RESET_DIVISION_LINE = "energy[i] = position[i] / position[i] - 1.0"
