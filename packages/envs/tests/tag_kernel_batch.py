"""A batch of Tag envs driven straight through an env module's kernels (shared by the Tag tests)."""

import numpy as np

from kernelgym.core import rng, to_numpy
from kernelgym.core.arrays import to_backend
from kernelgym.envs.tag._common import RESET_INPUTS, STEP_INPUTS


class KernelBatch:
    """``num_envs`` envs of the Tag module ``env_module`` (its SPEC, step and reset kernels).

    Builds every array the runtime would, then runs the reset kernel on all envs.
    """

    def __init__(self, env_module, backend, params, num_envs, seed=0):
        self.env_module, self.backend, self.params, self.num_envs = env_module, backend, params, num_envs
        spec = env_module.SPEC
        self.state_names = [array.name for array in spec.state]
        resolved = spec.resolve(params)
        self.num_agents = resolved.num_agents
        host = {
            "rng_states": rng.seed_streams(seed, num_envs),
            "reset_mask": np.ones(num_envs, bool),
            "obs": np.zeros((num_envs, self.num_agents, *resolved.observation_space.shape), np.float32),
            "rewards": np.zeros((num_envs, self.num_agents), np.float32),
            "terminated": np.zeros(num_envs, bool),
        }
        for array in spec.state:
            host[array.name] = np.full((num_envs, *resolved.state_shapes[array.name]), array.initial, array.dtype)
        self.arrays = {name: to_backend(value, backend) for name, value in host.items()}
        self._launch(env_module.reset_kernel, RESET_INPUTS)
        self.set_reset_mask(np.zeros(num_envs, bool))

    def _launch(self, kernel, inputs):
        args = [self.arrays[name] for name in (*inputs, *self.state_names)]
        kernel.launch(self.backend, self.num_envs, self.num_agents, *args,
                      *self.env_module.SPEC.params_tuple(self.params))

    def set_reset_mask(self, mask):
        self.arrays["reset_mask"] = to_backend(np.asarray(mask, bool), self.backend)

    def set_states(self, states):
        """Overwrite every env's state with ``states`` (one dict per env)."""
        host = self.host()
        for name in self.state_names:
            host[name][:] = np.stack([state[name] for state in states])
            self.arrays[name] = to_backend(host[name], self.backend)

    def step(self, actions):
        """One launch of the step kernel; returns host copies of every array."""
        self.arrays["actions"] = to_backend(np.asarray(actions, np.int64), self.backend)
        self._launch(self.env_module.step_kernel, STEP_INPUTS)
        return self.host()

    def host(self):
        return {name: to_numpy(value).copy() for name, value in self.arrays.items()}
