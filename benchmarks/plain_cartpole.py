"""The yardsticks of bench_step.py: CartPole as a plain hand-written numba prange loop.

The same work as kernelgym's composed CartPole step (gymnasium's physics from
`kernelgym.envs.classic.cartpole.dynamics`/`outcome`, float32 state, NEXT_STEP autoreset
with a 500-step time limit, start states drawn from each env's own `kernelgym.core.rng`
stream) written the way one would by hand: one function, every array an argument, no
checks. `plain_step` keeps no bookkeeping beyond the episode step counter (the yardstick
of ``make(..., episode_statistics=False)``); `plain_step_with_statistics` also keeps what
kernelgym's ``info`` carries by default: each finished episode's return and length and
the mask of envs that finished one (gymnasium's ``RecordEpisodeStatistics``).
"""

from __future__ import annotations

import numba
import numpy as np

from kernelgym.core import rng
from kernelgym.envs.classic.cartpole import CartPoleParams, dynamics, outcome

# gymnasium's constants as globals: numba freezes them into the compiled loop
_P = CartPoleParams()
GRAVITY, MASSCART, MASSPOLE, LENGTH, FORCE_MAG, TAU = (
    _P.gravity,
    _P.masscart,
    _P.masspole,
    _P.length,
    _P.force_mag,
    _P.tau,
)
SEMI_IMPLICIT, X_LIMIT, THETA_LIMIT, SUTTON_BARTO = (
    _P.semi_implicit_euler,
    _P.x_threshold,
    _P.theta_threshold_radians,
    _P.sutton_barto_reward,
)
BOUND = _P.reset_bound


# Written once for both loops; inline="always" makes each loop one function, as by hand.
@numba.njit(inline="always", cache=True)
def _reset_env(i, state, rewards, terminated, truncated, episode_steps, rng_states):
    for k in range(4):
        state[i, k] = rng.uniform_range(rng_states, i, -BOUND, BOUND)
    rewards[i] = 0.0
    terminated[i] = False
    truncated[i] = False
    episode_steps[i] = 0


@numba.njit(inline="always", cache=True)
def _step_env(i, actions, state, rewards, terminated, truncated, episode_steps, max_steps):
    """Step env ``i``; returns its reward."""
    x, x_dot, theta, theta_dot = dynamics(
        np.float64(state[i, 0]),
        np.float64(state[i, 1]),
        np.float64(state[i, 2]),
        np.float64(state[i, 3]),
        actions[i] == 1,
        GRAVITY,
        MASSCART,
        MASSPOLE,
        LENGTH,
        FORCE_MAG,
        TAU,
        SEMI_IMPLICIT,
        np.float64,
    )
    state[i, 0], state[i, 1], state[i, 2], state[i, 3] = x, x_dot, theta, theta_dot
    done, reward = outcome(np.float64(state[i, 0]), np.float64(state[i, 2]), X_LIMIT, THETA_LIMIT, SUTTON_BARTO)
    terminated[i] = done
    rewards[i] = reward
    episode_steps[i] += 1
    truncated[i] = episode_steps[i] >= max_steps
    return reward


@numba.njit(parallel=True, cache=True)
def plain_step(actions, state, obs, rewards, terminated, truncated, episode_steps, rng_states, max_steps):
    """One step of every env; an env whose episode ended last step is reset instead."""
    for i in numba.prange(actions.shape[0]):
        if terminated[i] or truncated[i]:
            _reset_env(i, state, rewards, terminated, truncated, episode_steps, rng_states)
        else:
            _step_env(i, actions, state, rewards, terminated, truncated, episode_steps, max_steps)
        for k in range(4):
            obs[i, k] = state[i, k]


@numba.njit(parallel=True, cache=True)
def plain_step_with_statistics(
    actions,
    state,
    obs,
    rewards,
    terminated,
    truncated,
    episode_steps,
    rng_states,
    max_steps,
    running_returns,
    episode_returns,
    episode_lengths,
    episode_mask,
):
    """`plain_step` that also records each finished episode's return and length."""
    for i in numba.prange(actions.shape[0]):
        if terminated[i] or truncated[i]:
            _reset_env(i, state, rewards, terminated, truncated, episode_steps, rng_states)
            running_returns[i] = 0.0
            episode_returns[i] = 0.0
            episode_lengths[i] = 0
            episode_mask[i] = False
        else:
            reward = _step_env(i, actions, state, rewards, terminated, truncated, episode_steps, max_steps)
            ended = terminated[i] or truncated[i]
            total = running_returns[i] + reward
            running_returns[i] = 0.0 if ended else total
            episode_returns[i] = total if ended else 0.0
            episode_lengths[i] = episode_steps[i] if ended else 0
            episode_mask[i] = ended
        for k in range(4):
            obs[i, k] = state[i, k]


class PlainCartPole:
    """The arrays of ``num_envs`` CartPoles and ``step(actions)`` through `plain_step`
    (`plain_step_with_statistics` when ``statistics``)."""

    def __init__(self, num_envs: int, seed: int = 0, max_steps: int = 500, statistics: bool = False):
        self.state = np.zeros((num_envs, 4), np.float32)
        self.obs = np.zeros((num_envs, 4), np.float32)
        self.rewards = np.zeros(num_envs, np.float32)
        self.terminated = np.ones(num_envs, np.bool_)  # the first step draws start states
        self.truncated = np.zeros(num_envs, np.bool_)
        self.episode_steps = np.zeros(num_envs, np.int32)
        self.rng_states = rng.seed_streams(seed, num_envs)
        self.max_steps = max_steps
        self.statistics = (
            (
                np.zeros(num_envs, np.float32),
                np.zeros(num_envs, np.float32),
                np.zeros(num_envs, np.int64),
                np.zeros(num_envs, np.bool_),
            )
            if statistics
            else None
        )

    def step(self, actions):
        if self.statistics is None:
            plain_step(
                actions,
                self.state,
                self.obs,
                self.rewards,
                self.terminated,
                self.truncated,
                self.episode_steps,
                self.rng_states,
                self.max_steps,
            )
        else:
            plain_step_with_statistics(
                actions,
                self.state,
                self.obs,
                self.rewards,
                self.terminated,
                self.truncated,
                self.episode_steps,
                self.rng_states,
                self.max_steps,
                *self.statistics,
            )
