"""GoRight-v0: walk right along a slippery corridor to the goal cell.

The agent starts at a random cell in ``[0, start_max]`` of a corridor ``[0, length]``.
Action 1 moves right, action 0 left; with probability ``slip`` the move goes the other
way. Reaching ``length`` ends the episode with reward +1; every other step costs
``step_cost``. The observation is the position divided by ``length``.

This module is all a plugin needs: a params record, one kernel body for step and one
for reset (compiled for cpu, cuda and the simulator from this source), a CPU reference,
an `EnvSpec` and the hook that returns it.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from gymnasium import spaces

from kernelgym.core import device_function, env_kernel, rng
from kernelgym.envs import CPUReference, EnvSpec, StateArray, hookimpl


# 1. The params record: scalars only, validated; make(..., length=20) overrides a field.
@dataclasses.dataclass(frozen=True)
class GoRightParams:
    length: int = 10
    start_max: int = 3
    slip: float = 0.1
    step_cost: float = 0.01

    def __post_init__(self):
        if self.length < 1:
            raise ValueError(f"GoRightParams length: expected >= 1, got {self.length}")
        if not 0 <= self.start_max < self.length:
            raise ValueError(f"GoRightParams start_max: expected 0 <= start_max < length, got {self.start_max}")
        if not 0.0 <= self.slip <= 1.0:
            raise ValueError(f"GoRightParams slip: expected a probability, got {self.slip}")


# 2. Helpers that take arrays are device functions: inlined into every kernel.
@device_function
def _start(i, rng_states, position, start_max):
    position[i] = rng.randint(rng_states, i, start_max + 1)


@device_function
def _observe(i, obs, position, length):
    obs[i, 0] = position[i] / length


# 3. The kernels. The runtime passes (actions, rng_states, reset_mask, obs, rewards,
#    terminated), then the state arrays in EnvSpec.state order, then the params fields.
@env_kernel
def step(i, actions, rng_states, reset_mask, obs, rewards, terminated, position,
         length, start_max, slip, step_cost):
    if reset_mask[i]:  # the previous step ended the episode: start a new one instead
        _start(i, rng_states, position, start_max)
        rewards[i] = 0.0
        terminated[i] = False
    else:
        move = 1 if actions[i] == 1 else -1
        if rng.uniform(rng_states, i) < slip:
            move = -move
        position[i] = min(max(position[i] + move, 0), length)
        at_goal = position[i] == length
        terminated[i] = at_goal
        rewards[i] = 1.0 if at_goal else -step_cost
    _observe(i, obs, position, length)


@env_kernel
def reset(i, rng_states, reset_mask, obs, position, length, start_max, slip, step_cost):
    if reset_mask[i]:
        _start(i, rng_states, position, start_max)
        _observe(i, obs, position, length)


# 4. The CPU reference: one env in plain numpy, the ground truth for tests.
def _reference_reset(params, generator):
    return {"position": np.int32(generator.integers(0, params.start_max + 1)).reshape(())}


def _reference_step(params, state, action, generator):
    move = 1 if int(action) == 1 else -1
    if generator.random() < params.slip:
        move = -move
    position = np.int32(min(max(int(state["position"]) + move, 0), params.length)).reshape(())
    at_goal = bool(position == params.length)
    return {"position": position}, (1.0 if at_goal else -params.step_cost), at_goal


def _reference_observe(params, state):
    return np.array([state["position"] / params.length], dtype=np.float32)


reference = CPUReference(_reference_reset, _reference_step, _reference_observe)


def state_strategy(params):
    """Hypothesis strategy of single-env states (for kernelgym's property-test kit)."""
    from hypothesis import strategies as st

    return st.integers(0, params.length - 1).map(lambda p: {"position": np.int32(p).reshape(())})


def invariants(params, state):
    """The agent never leaves the corridor."""
    assert 0 <= int(state["position"]) <= params.length, state


# 5. The spec: kernels and helpers named lazily ("module:attr"), so discovering the
#    plugin neither imports heavy code paths nor compiles anything.
SPEC = EnvSpec(
    id="GoRight-v0",
    observation_space=spaces.Box(0.0, 1.0, (1,), np.float32),
    action_space=spaces.Discrete(2),
    state=(StateArray("position", np.int32),),
    step_kernel=f"{__name__}:step",
    reset_kernel=f"{__name__}:reset",
    reference=f"{__name__}:reference",
    params=GoRightParams(),
    max_episode_steps=50,
    state_strategy=f"{__name__}:state_strategy",
    invariants=f"{__name__}:invariants",
    description="Walk right along a slippery corridor (example plugin).",
)


# 6. The hook kernelgym calls through the "kernelgym.envs" entry point.
@hookimpl
def kernelgym_register_envs():
    return [SPEC]
