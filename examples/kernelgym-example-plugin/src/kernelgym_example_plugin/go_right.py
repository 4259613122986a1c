"""GoRight-v0: walk right along a slippery corridor to the goal cell.

The agent starts at a random cell in ``[0, start_max]`` of a corridor ``[0, length]``.
Action 1 moves right, action 0 left; with probability ``slip`` the move goes the other
way. Reaching ``length`` ends the episode with reward +1; every other step costs
``step_cost``. The observation is the position divided by ``length``.

This module is all a plugin needs: a params record, the physics written once, a step
and a reset kernel that name what they use, the exact reference (same physics, same
random stream), an `EnvSpec` and the hook that returns it. The runtime does the rest
(autoreset, time limit, counters), and kernelgym's property-test kit checks it all.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from gymnasium import spaces

from kernelgym.core import device_function, env_kernel, rng
from kernelgym.envs import CPUReference, EnvSpec, StateArray, hookimpl


# 1. The params record: scalars only; make("GoRight-v0", n, length=20) overrides a field.
@dataclasses.dataclass(frozen=True)
class GoRightParams:
    length: int = 10
    start_max: int = 3
    slip: float = 0.1
    step_cost: float = 0.01

    def __post_init__(self):
        if self.length < 1 or not 0 <= self.start_max < self.length or not 0.0 <= self.slip <= 1.0:
            raise ValueError(
                f"GoRightParams: expected length >= 1, 0 <= start_max < length, 0 <= slip <= 1; got {self}"
            )


# 2. The physics, once: a function the kernel and the reference both call.
@device_function
def move(position, action, slipped, length, step_cost):
    step = (1 if action == 1 else -1) * (-1 if slipped else 1)
    position = min(max(position + step, 0), length)
    return position, position == length, 1.0 if position == length else -step_cost


# 3. The kernels name what they use: runtime buffers, state arrays, params fields.
@env_kernel
def step(i, actions, rng_states, obs, rewards, terminated, position, length, slip, step_cost):
    slipped = rng.uniform(rng_states, i) < slip
    position[i], terminated[i], rewards[i] = move(position[i], actions[i], slipped, length, step_cost)
    obs[i, 0] = position[i] / length


@env_kernel
def reset(i, rng_states, obs, position, length, start_max):
    position[i] = rng.randint(rng_states, i, start_max + 1)
    obs[i, 0] = position[i] / length


# 4. The exact reference: one env, drawing from its own stream (a (1, 2) array, row 0).
def _reference_reset(params, rng_states):
    return {"position": np.int32(rng.randint(rng_states, 0, params.start_max + 1)).reshape(())}


def _reference_step(params, state, action, rng_states):
    slipped = rng.uniform(rng_states, 0) < params.slip
    position, at_goal, reward = move(np.int32(state["position"]), int(action), slipped, params.length, params.step_cost)
    return {"position": np.int32(position).reshape(())}, reward, bool(at_goal)


reference = CPUReference(
    _reference_reset, _reference_step, lambda params, state: np.array([state["position"] / params.length], np.float32)
)

# 5. The spec, and the hook kernelgym calls through the "kernelgym.envs" entry point.
# --8<-- [start:spec]
SPEC = EnvSpec(
    id="GoRight-v0",
    observation_space=spaces.Box(0.0, 1.0, (1,), np.float32),
    action_space=spaces.Discrete(2),
    # bounds: set_state refuses a position off the corridor
    state=(StateArray("position", np.int32, low=0, high=lambda params: params.length),),
    step_kernel=step,
    reset_kernel=reset,
    reference=reference,
    params=GoRightParams(),
    max_episode_steps=50,
    description="Walk right along a slippery corridor (example plugin).",
    state_strategy=f"{__name__}:state_strategy",
    invariants=f"{__name__}:invariants",
)


@hookimpl
def kernelgym_register_envs():
    return [SPEC]


# --8<-- [end:spec]


# 6. Optional, for the property-test kit: states to start from, and rules that always hold.
def state_strategy(params):
    from hypothesis import strategies as st

    return st.integers(0, params.length - 1).map(lambda p: {"position": np.int32(p).reshape(())})


def invariants(params, state):
    assert 0 <= int(state["position"]) <= params.length, f"position {state['position']} left the corridor"
