"""A batch of Tag envs run by the runtime, and rollouts against the sequential reference.

Shared by the Tag tests. `rollout_against_reference` follows every env with the
env's own reference, agent by agent, through NEXT_STEP autoresets: on cpu and in the
simulator kernel and reference must agree bit for bit (the crowded scenarios tag
several runners of one env in one step, so every value several agents write through
``atomic_add`` is checked); on cuda within float32 tolerance.
"""

import dataclasses

import numpy as np

from kernelgym.core import rng
from kernelgym.envs.vector_env import KernelVectorEnv

# cuda's libdevice cos/sin and fused multiply-adds may change the last bits
CUDA_TOLERANCE = {"rtol": 1e-5, "atol": 1e-6}


class KernelBatch:
    """``num_envs`` envs of the Tag module ``env_module`` (its SPEC), reset with ``seed``."""

    def __init__(self, env_module, backend, params, num_envs, seed=0):
        self.env_module, self.backend, self.params, self.num_envs = env_module, backend, params, num_envs
        self.state_names = [array.name for array in env_module.SPEC.state]
        self.env = KernelVectorEnv(env_module.SPEC, num_envs, backend=backend, seed=seed, **dataclasses.asdict(params))
        self.num_agents = self.env.num_agents
        self.env.reset(seed=seed)

    def set_states(self, states):
        """Overwrite every env's state with ``states`` (one dict per env)."""
        self.env.set_state({name: np.stack([np.asarray(state[name]) for state in states]) for name in self.state_names})

    def step(self, actions):
        """One step of every env; returns host copies of the state and the outputs."""
        self.env.step(np.asarray(actions, np.int64))
        return self.host()

    def host(self):
        """Host copies: every state array, ``obs``, ``rewards``, ``terminated``, ``truncated``, ``rng_states``."""
        views = self.env.numpy()
        outputs = {name: np.array(getattr(views, name)) for name in ("obs", "rewards", "terminated", "truncated")}
        return {**self.env.get_state(), **outputs, "rng_states": self.env.get_rng_states()}


def env_state(out, names, env):
    return {name: out[name][env] for name in names}


def rollout_against_reference(env_module, backend, params, num_envs, num_steps, seed, draw_actions):
    """Step ``num_envs`` envs with ``draw_actions(generator, num_envs)`` and compare every env
    with the reference after every step, resets included. Returns the number of runners tagged."""
    reference = env_module.REFERENCE
    batch = KernelBatch(env_module, backend, params, num_envs, seed)
    names = batch.state_names
    exact = backend != "cuda"

    def same(actual, expected, where):
        if exact:
            np.testing.assert_array_equal(actual, expected, err_msg=where)
        else:
            np.testing.assert_allclose(actual, expected, err_msg=where, **CUDA_TOLERANCE)

    def check(out, env, state, reward, terminated, where):
        actual = env_state(out, names, env)
        for name in names:
            same(actual[name], state[name], f"{where}: {name}")
        same(out["rewards"][env], reward, f"{where}: rewards")
        assert out["terminated"][env] == terminated, where
        same(out["obs"][env], reference.observe(params, state), f"{where}: obs")
        env_module.check_invariants(params, actual)

    generator = np.random.default_rng(seed)
    # agent-layout envs: one stream per (env, agent); the reference draws from its env's rows
    streams = rng.seed_agent_streams(seed, num_envs, batch.num_agents)
    out = batch.host()
    expected = []
    for env in range(num_envs):
        stream = streams[env].copy()
        expected.append(reference.reset(params, stream))
        check(out, env, expected[env], np.zeros(batch.num_agents, np.float32), False, f"reset env {env}")
        np.testing.assert_array_equal(out["rng_states"][env], stream)
    pending = np.zeros(num_envs, bool)
    tags = 0
    for t in range(num_steps):
        streams = out["rng_states"]
        actions = draw_actions(generator, num_envs)
        out = batch.step(actions)
        for env in range(num_envs):
            where = f"step {t} env {env}"
            stream = streams[env].copy()
            if pending[env]:  # the runtime's NEXT_STEP autoreset
                expected[env] = reference.reset(params, stream)
                reward, terminated = np.zeros(batch.num_agents, np.float32), False
            else:
                previous = expected[env]
                expected[env], reward, terminated = reference.step(params, previous, actions[env], stream)
                # a tagged runner stays out and stays put
                out_before = ~previous["in_game"]
                assert not np.any(out["in_game"][env][out_before]), where
                np.testing.assert_array_equal(out["loc_x"][env][out_before], previous["loc_x"][out_before])
                tags += int(previous["runners_left"]) - int(expected[env]["runners_left"])
            check(out, env, expected[env], reward, terminated, where)
            np.testing.assert_array_equal(out["rng_states"][env], stream, err_msg=where)
        pending = out["terminated"] | out["truncated"]
    return tags
