"""A hypothesis state machine: random reset / step / set_state / bad-step sequences.

The machine drives one `KernelVectorEnv` and an `EpisodeModel` side by side; after
every rule the env must agree with the model and the CPU reference, observations must
lie in the observation space and the spec's invariants must hold in every env. A bad
step is refused as the env's value check promises (`refusals`): with a deferred check
(cuda, sim) the envs with good actions step and the model follows them, and the fault
is read within the rule, so that the machine stays deterministic.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kernelgym.envs.testing import refusals, strategies
from kernelgym.envs.testing.episodes import EpisodeModel
from kernelgym.envs.testing.harness import env_slice, fail_on, flat_obs

__all__ = ["env_state_machine"]

NUM_ENVS = 3  # a prime: one partly filled block on a GPU
MAX_EPISODE_STEPS = 4  # short episodes, so random sequences cross many resets


def env_state_machine(harness) -> type[RuleBasedStateMachine]:
    """A `RuleBasedStateMachine` class testing ``harness``'s env against its reference."""
    space = harness.action_space
    actions = strategies.batch_actions(space, NUM_ENVS, harness.num_agents)
    bad_actions = strategies.invalid_actions(space, NUM_ENVS, harness.num_agents)
    states = strategies.states(harness.spec, harness.params, harness.reference)

    class EnvMachine(RuleBasedStateMachine):
        @initialize(seed=strategies.seeds(), mode=st.sampled_from(["next_step", "same_step"]))
        def make_env(self, seed, mode):
            self.env = harness.make_env(NUM_ENVS, seed, autoreset_mode=mode, max_episode_steps=MAX_EPISODE_STEPS)
            self.model = EpisodeModel(harness, NUM_ENVS, MAX_EPISODE_STEPS, same_step=mode == "same_step")
            self._start(harness.seed_streams(seed, NUM_ENVS))

        def _start(self, streams):
            """After a reset that drew from ``streams`` (the rows before it)."""
            obs = flat_obs(harness.observation_space, self.env.numpy().obs)
            self.model.restart()
            fail_on(
                self.model.start_problems(obs, self.env.get_state(), streams, self.env.get_rng_states()), "after reset"
            )

        @rule(seed=st.none() | strategies.seeds())
        def reset(self, seed):
            streams = self.env.get_rng_states() if seed is None else harness.seed_streams(seed, NUM_ENVS)
            self.env.reset(seed=seed, numpy=True)
            self._start(streams)

        @rule(actions=actions)
        def step(self, actions):
            prev, streams = self.env.get_state(), self.env.get_rng_states()
            result = harness.step(self.env, actions)
            fail_on(self.model.step_problems(prev, streams, actions, result), "step")

        @rule(index=st.integers(0, NUM_ENVS - 1), state=states)
        def set_state(self, index, state):
            written = {name: np.asarray(value) for name, value in state.items()}
            self.env.set_state(written, index=index, check_invariants=False)
            self.model.restart(index, written)

        @rule(bad=bad_actions)
        def refused_step(self, bad):
            if bad.expected == "clip":
                return  # clipping is a successful step; the invalid_actions check covers it
            before = refusals.snapshot(self.env)
            # refuse reads a deferred fault at once: none may surface in a later rule
            outputs = refusals.refuse(self.env, bad, space)
            refused = range(NUM_ENVS) if outputs is None else refusals.bad_envs(space, bad.actions)
            after = refusals.snapshot(self.env)
            for index in refused:
                changed = refusals.changes(before, after, index)
                assert not changed, f"env {index}: a refused step({bad.kind} actions) changed {changed}"
            if outputs is not None:  # deferred: the envs with good actions stepped
                stepped = [index for index in range(NUM_ENVS) if index not in refused]
                result = refusals.step_result(self.env, outputs)
                state, _, streams = before
                fail_on(
                    self.model.step_problems(state, streams, bad.actions, result, envs=stepped),
                    "the envs with good actions in a deferred refused step",
                )

        @invariant()
        def spec_invariants_hold(self):
            if not hasattr(self, "env"):
                return
            state = self.env.get_state()
            problems = []
            for index in range(NUM_ENVS):
                env_state = env_slice(state, index)
                found = harness.invariant_problems(env_state)
                if found:
                    problems.append(harness.env_problem(index, found))
            fail_on(problems, "invariants")

    EnvMachine.__name__ = EnvMachine.__qualname__ = f"{_identifier(harness.spec.id)}Machine"
    return EnvMachine


def _identifier(text: str) -> str:
    return "".join(character if character.isalnum() else "_" for character in text)
