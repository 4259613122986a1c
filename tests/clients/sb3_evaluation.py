"""The mean return an SB3 model reaches on a kernelgym SB3 VecEnv (the learning tests' measure)."""

import numpy as np


def mean_episode_return(model, venv, episodes: int) -> float:
    """Mean return of the first ``episodes`` episodes that end, acting deterministically from a reset."""
    returns, total = [], np.zeros(venv.num_envs)
    obs = venv.reset()
    while len(returns) < episodes:
        actions, _ = model.predict(obs, deterministic=True)
        obs, rewards, dones, _ = venv.step(actions)
        total += rewards
        returns += list(total[dones])
        total[dones] = 0.0
    return float(np.mean(returns))
