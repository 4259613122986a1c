"""The kit's checks: each one a hypothesis property of an env on one backend.

A check is a function ``check(harness, config) -> note or None`` that raises
AssertionError when the env breaks the property; hypothesis has then shrunk the
failing input, and its "Falsifying example" / "Failing test case" note is attached to
the exception. `CHECKS` lists them in the order the report shows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from kernelgym.core import rng
from kernelgym.envs.testing import strategies
from kernelgym.envs.testing.canary import launch_padded
from kernelgym.envs.testing.episodes import EpisodeModel
from kernelgym.envs.testing.gpu_compile import check_gpu_compile
from kernelgym.envs.testing.harness import RANDOM_START_PROBES, EnvHarness, env_slice, fail_on, flat_obs
from kernelgym.envs.testing.long_horizon import check_long_horizon
from kernelgym.envs.testing.nonfinite import locate_differences, locate_nonfinite, nonfinite_arrays
from kernelgym.envs.testing.order_check import check_agent_order
from kernelgym.envs.testing.per_env import check_per_env_params

__all__ = ["CHECKS", "Check", "CheckConfig"]

# Steps per rollout (sim runs every thread as Python: fewer there).
MAX_ROLLOUT_STEPS = {"cpu": 25, "cuda": 25, "sim": 8}
# Hypothesis's "explain" phase lists covered lines: noise in an env report.
PHASES = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink)
SUPPRESSED = (
    HealthCheck.too_slow,
    HealthCheck.data_too_large,
    HealthCheck.filter_too_much,
    HealthCheck.large_base_example,
)


@dataclasses.dataclass(frozen=True)
class CheckConfig:
    """How hard to look: hypothesis examples per check and the seed that reproduces a run."""

    max_examples: int
    seed: int | None = None

    def hypothesis_settings(self, **overrides) -> settings:
        """The hypothesis settings of a check (no example database: runs are reproducible by seed)."""
        options = {
            "max_examples": self.max_examples,
            "deadline": None,
            "database": None,
            "report_multiple_bugs": False,
            "print_blob": False,
            "phases": PHASES,
            "suppress_health_check": SUPPRESSED,
        }
        return settings(settings.default, **{**options, **overrides})

    def run(self, test: Callable) -> None:
        """Run a ``@given`` test with these settings and seed."""
        self.run_configured(self.hypothesis_settings()(test))

    def run_configured(self, test: Callable) -> None:
        """Run a ``@given`` test whose settings are already applied, pinned to this seed."""
        if self.seed is not None:
            test = hypothesis_seed(self.seed)(test)
        test()


@dataclasses.dataclass(frozen=True)
class Check:
    """One named property: ``run(harness, config)`` and what it promises."""

    name: str
    run: Callable[[EnvHarness, CheckConfig], str | None]
    description: str


def _rollout_steps(harness: EnvHarness) -> st.SearchStrategy[int]:
    return st.integers(1, MAX_ROLLOUT_STEPS[harness.backend])


def _batch_states(harness: EnvHarness, min_envs: int = 1):
    """(num_envs, start states or None): a rollout starts from ``reset`` or from drawn states."""
    states = strategies.states(harness.spec, harness.params, harness.reference)

    @st.composite
    def build(draw):
        count = draw(strategies.num_envs(harness.backend, min_envs))
        if not draw(st.booleans()):
            return count, None
        distinct = draw(st.lists(states, min_size=1, max_size=min(count, 4)))
        return count, tuple(distinct[i % len(distinct)] for i in range(count))

    return build()


def _start(harness: EnvHarness, env, start_states) -> dict | None:
    """Write the drawn start states (if any) into ``env``; returns the batch written, or None."""
    if start_states is None:
        return None
    written = harness.stack_states(start_states)
    env.set_state(written, check_invariants=False)  # the invariants check reports broken ones
    return written


# ------------------------------------------------------------------------ parity
def check_parity(harness: EnvHarness, config: CheckConfig) -> None:
    """One step from drawn states (and params, where the spec declares ranges) matches the exact
    reference; flagged envs reset exactly as it does."""
    base = harness
    fixed = () if harness.overrides is None else tuple(harness.overrides)
    # with no ranges this is st.just({}): the batches are drawn as before
    overrides = strategies.param_overrides(harness.spec, fixed) if harness.spec.param_ranges else st.just({})

    @given(drawn=overrides, seed=strategies.seeds(), data=st.data())
    def parity(drawn, seed, data):
        harness = base.with_params(drawn)
        batch = data.draw(strategies.batches(harness.spec, harness.params, harness.backend), label="batch")
        env = harness.make_env(batch.num_envs, seed, max_episode_steps=1)
        prev = harness.load_batch(env, batch, seed)
        streams = env.get_rng_states()
        result = harness.step(env, batch.actions)
        problems = []
        for index in range(batch.num_envs):
            new_state = result.env_slice(index)
            obs, reward, terminated = result.obs[index], result.rewards[index], result.terminated[index]
            prev_env = env_slice(prev, index)
            if batch.pending[index]:
                found = harness.reset_problems(
                    new_state, obs, reward, terminated, streams[index], result.rng[index], previous=prev_env
                )
                found = ["reset branch: " + text for text in found]
                if result.truncated[index]:
                    found.append("reset branch: truncated True, expected False")
                if found:
                    found += _where_different(
                        harness, result, index, ("reset_kernel", prev, batch.actions, streams), found
                    )
                    problems.append(harness.env_problem(index, found, prev_env))
                continue
            found = harness.step_problems(
                prev_env, batch.actions[index], streams[index], new_state, obs, reward, terminated, result.rng[index]
            )
            if found:
                found += _where_different(harness, result, index, ("step_kernel", prev, batch.actions, streams), found)
                problems.append(harness.env_problem(index, found, prev_env, batch.actions[index]))
        drawn_text = f" with the params drawn from EnvSpec.param_ranges {drawn}" if drawn else ""
        fail_on(problems, f"kernel and CPU reference disagree{drawn_text}")

    config.run(parity)


# ------------------------------------------------------------------- determinism
def _trajectory(harness: EnvHarness, env, seed: int, actions_seed: int, steps: int) -> list:
    env.reset(seed=seed, numpy=True)
    generator = np.random.default_rng(actions_seed)
    prefix = (env.num_envs, *harness.agent_shape)
    results = []
    for _ in range(steps):
        results.append(harness.step(env, strategies.random_actions(harness.action_space, prefix, generator)))
    return results


def _first_difference(a: list, b: list, num_envs: int) -> str | None:
    for step, (left, right) in enumerate(zip(a, b)):
        for index in range(num_envs):
            differing = left.differences(right, index)
            if differing:
                return f"step {step + 1}, env {index}: {', '.join(differing)} differ"
    return None


def check_determinism(harness: EnvHarness, config: CheckConfig) -> str | None:
    """The same seed gives bitwise-identical trajectories; different seeds give different ones."""

    @given(
        count=strategies.num_envs(harness.backend),
        seed=strategies.seeds(),
        other_seed=strategies.seeds(),
        actions_seed=strategies.seeds(),
        steps=_rollout_steps(harness),
        limit=st.integers(1, 10),
    )
    def determinism(count, seed, other_seed, actions_seed, steps, limit):
        first = harness.make_env(count, seed, max_episode_steps=limit, fresh=True)
        second = harness.make_env(count, seed, max_episode_steps=limit, fresh=True)
        reference = _trajectory(harness, first, seed, actions_seed, steps)
        difference = _first_difference(reference, _trajectory(harness, second, seed, actions_seed, steps), count)
        assert difference is None, f"two envs made with seed {seed} diverged: {difference}"
        difference = _first_difference(reference, _trajectory(harness, first, seed, actions_seed, steps), count)
        assert difference is None, f"reset(seed={seed}) did not replay the trajectory: {difference}"
        if harness.random_start and other_seed != seed:
            # the whole largest batch: a start drawn from few values may repeat in a few envs
            largest = max(strategies.NUM_ENVS[harness.backend])
            env = harness.make_env(largest, seed)
            starts = env.get_state()
            env.reset(seed=other_seed, numpy=True)
            assert any(not np.array_equal(value, starts[name]) for name, value in env.get_state().items()), (
                f"seeds {seed} and {other_seed} gave the same start states to all {largest} envs, "
                "but the reference draws random starts"
            )

    config.run(determinism)
    if not harness.random_start and harness.reset_draws:
        return (
            f"the reference's reset draws from its stream but gave one start state for {RANDOM_START_PROBES} "
            "seeds, so whether different seeds give different starts was not checked"
        )
    if not harness.random_start:
        return "the reference's start state is fixed, so different seeds may give the same trajectory"
    return None


def check_batch_invariance(harness: EnvHarness, config: CheckConfig) -> None:
    """Env i's trajectory (same seed, same actions) does not depend on the batch size."""
    sizes = strategies.NUM_ENVS[harness.backend]

    @given(
        pair=st.lists(st.sampled_from(sizes), min_size=2, max_size=2, unique=True),
        seed=strategies.seeds(),
        actions_seed=strategies.seeds(),
        steps=_rollout_steps(harness),
        limit=st.integers(1, 10),
    )
    def batch_invariance(pair, seed, actions_seed, steps, limit):
        small, large = sorted(pair)
        small_env = harness.make_env(small, seed, max_episode_steps=limit)
        large_env = harness.make_env(large, seed, max_episode_steps=limit)
        generator = np.random.default_rng(actions_seed)
        for step in range(steps):
            actions = strategies.random_actions(harness.action_space, (large, *harness.agent_shape), generator)
            small_result = harness.step(small_env, actions[:small])
            large_result = harness.step(large_env, actions)
            for index in range(small):
                differing = small_result.differences(large_result, index)
                assert not differing, (
                    f"step {step + 1}: env {index} of {small} and env {index} of {large} differ in "
                    f"{', '.join(differing)}"
                )

    config.run(batch_invariance)


def check_no_cross_talk(harness: EnvHarness, config: CheckConfig) -> None:
    """Changing env j's state, action or reset flag changes nothing in any other env."""
    states = strategies.states(harness.spec, harness.params, harness.reference)
    batches = strategies.batches(harness.spec, harness.params, harness.backend, min_envs=2, state_strategy=states)

    @given(batch=batches, seed=strategies.seeds(), data=st.data())
    def no_cross_talk(batch, seed, data):
        changed = data.draw(st.integers(0, batch.num_envs - 1), label="changed env")
        other = batch.replace(
            changed,
            data.draw(states, label="its new state"),
            data.draw(
                strategies.actions(harness.action_space)
                if not harness.agent_shape
                else strategies.batch_actions(harness.action_space, 1, harness.num_agents).map(lambda a: a[0]),
                label="its new action",
            ),
            data.draw(st.booleans(), label="its new reset flag"),
        )
        env = harness.make_env(batch.num_envs, seed, max_episode_steps=1)
        harness.load_batch(env, batch, seed)
        base = harness.step(env, batch.actions)
        harness.load_batch(env, other, seed)
        varied = harness.step(env, other.actions)
        for index in range(batch.num_envs):
            if index == changed:
                continue
            differing = base.differences(varied, index)
            assert not differing, f"changing env {changed} changed env {index}'s {', '.join(differing)}"

    config.run(no_cross_talk)


# ---------------------------------------------------------------------- episodes
def check_autoreset(harness: EnvHarness, config: CheckConfig) -> None:
    """Resets follow exactly the done step, counters restart, flags stay distinct, SAME_STEP keeps final obs."""

    @given(
        start=_batch_states(harness),
        seed=strategies.seeds(),
        actions_seed=strategies.seeds(),
        limit=st.integers(1, 6),
        steps=_rollout_steps(harness),
        mode=st.sampled_from(["next_step", "same_step"]),
    )
    def autoreset(start, seed, actions_seed, limit, steps, mode):
        count, start_states = start
        env = harness.make_env(count, seed, autoreset_mode=mode, max_episode_steps=limit)
        written = _start(harness, env, start_states)
        model = EpisodeModel(harness, count, limit, same_step=mode == "same_step", envs=_watched_envs(count))
        model.restart(state=written)  # envs set mid-episode are that far into their time limit
        generator = np.random.default_rng(actions_seed)
        for step in range(steps):
            actions = strategies.random_actions(harness.action_space, (count, *harness.agent_shape), generator)
            prev, streams = env.get_state(), env.get_rng_states()
            result = harness.step(env, actions)
            fail_on(
                model.step_problems(prev, streams, actions, result), f"step {step + 1} ({mode}, time limit {limit})"
            )

    config.run(autoreset)


def _watched_envs(count: int) -> list[int]:
    """The envs whose episodes the model follows: the first and last few (the reference is slow
    in Python; per-index bugs are the business of batch_invariance and no_cross_talk)."""
    return sorted(set(range(min(count, 4))) | set(range(max(0, count - 4), count)))


def _where_nonfinite(harness: EnvHarness, result, index: int, launch: tuple[str, dict, Any, Any]) -> list[str]:
    """Where env ``index``'s NaN or inf arises, if its outputs or state hold one (else nothing).

    ``launch`` is what ran: ``(kernel_field, state, actions, rng_states)``, the batch's
    inputs of the launch (see `locate_nonfinite`).
    """
    outputs = {"obs": result.obs[index], "rewards": result.rewards[index], **result.env_slice(index)}
    if not nonfinite_arrays(outputs):
        return []
    return [locate_nonfinite(harness, *launch, index)]


def _where_different(harness: EnvHarness, result, index: int, launch: tuple, found: list[str]) -> list[str]:
    """`_where_nonfinite`, or else the kernel lines that last wrote what ``found`` says differs."""
    kernel_field, state, actions, rng_states = launch
    return _where_nonfinite(harness, result, index, launch) or locate_differences(
        harness, kernel_field, state, actions, rng_states, index, found
    )


def _rollout_check(harness: EnvHarness, config: CheckConfig, name: str, inspect) -> None:
    """Random rollouts at the spec's own time limit; ``inspect(result, env_index)`` lists problems."""

    def located(result, state, actions, streams, pending) -> list[str]:
        # the launch's inputs, to say where a NaN or inf arises: a pending env was reset, not stepped
        def launch(i):
            return ("reset_kernel" if pending[i] else "step_kernel", state, actions, streams)

        return [
            harness.env_problem(i, found + _where_nonfinite(harness, result, i, launch(i)))
            for i in range(result.obs.shape[0])
            if (found := inspect(result, i))
        ]

    @given(
        start=_batch_states(harness),
        seed=strategies.seeds(),
        actions_seed=strategies.seeds(),
        steps=_rollout_steps(harness),
    )
    def rollout(start, seed, actions_seed, steps):
        count, start_states = start
        env = harness.make_env(count, seed)
        first = _Reset(
            flat_obs(harness.observation_space, env.numpy().obs), env.get_state(), count, harness.agent_shape
        )
        any_actions = strategies.random_actions(
            harness.action_space, (count, *harness.agent_shape), np.random.default_rng(0)
        )
        fail_on(
            located(first, first.state, any_actions, rng.seed_streams(seed, count), np.ones(count, bool)), "after reset"
        )
        _start(harness, env, start_states)
        generator = np.random.default_rng(actions_seed)
        prev, streams = env.get_state(), env.get_rng_states()
        pending = np.zeros(count, bool)  # NEXT_STEP: an env done at one step is reset at the next
        for step in range(steps):
            actions = strategies.random_actions(harness.action_space, (count, *harness.agent_shape), generator)
            result = harness.step(env, actions)
            fail_on(located(result, prev, actions, streams, pending), f"step {step + 1}")
            prev, streams, pending = result.state, result.rng, result.terminated | result.truncated

    rollout.__name__ = rollout.__qualname__ = name
    config.run(rollout)


class _Reset:
    """What ``reset`` shows, shaped like a step result (reward 0, no flags)."""

    def __init__(self, obs, state, count, agent_shape):
        self.obs, self.state = obs, state
        self.rewards = np.zeros((count, *agent_shape), np.float32)
        self.terminated = self.truncated = np.zeros(count, bool)

    def env_slice(self, index):
        return env_slice(self.state, index)


def check_observations(harness: EnvHarness, config: CheckConfig) -> None:
    """Observations lie in the observation space; no NaN or inf in observations, rewards or state."""
    obs_shape = harness.obs_shape

    def inspect(result, index):
        problems = []
        if result.obs.shape[1:] != obs_shape:
            problems.append(f"observation shape {result.obs.shape[1:]}, expected {obs_shape}")
        if result.rewards.dtype != np.float32 or result.rewards.shape[1:] != harness.agent_shape:
            problems.append(f"rewards {result.rewards.dtype}{result.rewards.shape}, expected float32 per agent")
        return (
            problems
            + harness.space_problems(result.obs[index], result.rewards[index])
            + harness.nonfinite_state_problems(result.env_slice(index))
        )

    _rollout_check(harness, config, "observations", inspect)


def check_invariants(harness: EnvHarness, config: CheckConfig) -> str | None:
    """The spec's invariants hold in every reached state; the agent count is conserved."""
    agents = harness.num_agents
    per_agent = [array.name for array in harness.spec.state if array.per_agent]

    def inspect(result, index):
        problems = []
        state = result.env_slice(index)
        for name in per_agent:
            if np.shape(state[name])[:1] != (agents,):
                problems.append(f"state {name!r} holds {np.shape(state[name])[:1]} agents, expected {agents}")
        if agents > 1 and (result.obs.shape[1] != agents or result.rewards.shape[1] != agents):
            problems.append(
                f"obs/rewards hold {result.obs.shape[1]}/{result.rewards.shape[1]} agents, expected {agents}"
            )
        return problems + harness.invariant_problems(state)

    _rollout_check(harness, config, "invariants", inspect)
    if harness.invariants is None:
        return "the spec declares no invariants (EnvSpec.invariants); only agent counts were checked"
    return None


# -------------------------------------------------------------------- bad input
def check_invalid_actions(harness: EnvHarness, config: CheckConfig) -> None:
    """Invalid actions raise the documented error (or are clipped) and corrupt nothing."""
    # with the env's "deferred" value check (cuda, sim) a bad value raises at the next
    # check_actions(), not in the step: the bad env is left as it was, and the envs with
    # good actions step as if the bad env's action had been good (`refusals`)
    from kernelgym.envs.testing import refusals

    batches = strategies.batches(harness.spec, harness.params, harness.backend)

    @given(batch=batches, seed=strategies.seeds(), data=st.data())
    def invalid_actions(batch, seed, data):
        bad = data.draw(
            strategies.invalid_actions(harness.action_space, batch.num_envs, harness.num_agents),
            label="invalid actions",
        )
        env = harness.make_env(batch.num_envs, seed, max_episode_steps=1)
        if bad.expected == "clip":
            harness.load_batch(env, batch, seed)
            clipped_run = harness.step(env, bad.actions)
            harness.load_batch(env, batch, seed)
            low, high = harness.action_space.low, harness.action_space.high
            expected_run = harness.step(env, np.clip(bad.actions, low, high).astype(bad.actions.dtype))
            for index in range(batch.num_envs):
                differing = clipped_run.differences(expected_run, index)
                assert not differing, (
                    f"env {index}: an action outside the Box was not clipped to it: {', '.join(differing)} "
                    "differ from a step with the clipped action"
                )
            return
        harness.load_batch(env, batch, seed)
        before = refusals.snapshot(env)
        outputs = refusals.refuse(env, bad, harness.action_space)
        # a "sync" refusal steps no env; a deferred one only the envs with a bad action
        refused_envs = (
            list(range(batch.num_envs)) if outputs is None else refusals.bad_envs(harness.action_space, bad.actions)
        )
        after = refusals.snapshot(env)
        for index in refused_envs:
            changed = refusals.changes(before, after, index)
            assert not changed, f"env {index}: a refused step({bad.kind} actions) changed {changed}"
        refused_run = None if outputs is None else refusals.step_result(env, outputs)
        after_refusal = harness.step(env, batch.actions)
        harness.load_batch(env, batch, seed)
        untouched = harness.step(env, batch.actions)
        for index in refused_envs:
            differing = after_refusal.differences(untouched, index)
            assert not differing, (
                f"env {index}: the step after a refused step differs from one without it in {', '.join(differing)}"
            )
        if refused_run is not None:
            # the envs with good actions stepped as if every action had been good
            repaired = bad.actions.copy()
            repaired[refused_envs] = batch.actions[refused_envs]
            harness.load_batch(env, batch, seed)
            expected_run = harness.step(env, repaired)
            for index in sorted(set(range(batch.num_envs)) - set(refused_envs)):
                differing = refused_run.differences(expected_run, index)
                assert not differing, (
                    f"env {index} (good actions, stepped by a deferred refusal): {', '.join(differing)} differ "
                    "from a step without the bad env's action"
                )

    config.run(invalid_actions)


def check_out_of_bounds(harness: EnvHarness, config: CheckConfig) -> None:
    """The step and reset kernels write only their own envs' rows (canary-padded buffers)."""
    batches = strategies.batches(harness.spec, harness.params, harness.backend)

    @given(batch=batches, seed=strategies.seeds())
    def out_of_bounds(batch, seed):
        state = harness.stack_states(batch.states)
        problems = launch_padded(harness, "step_kernel", state, batch.actions, seed)
        problems += launch_padded(harness, "reset_kernel", state, batch.actions, seed)
        fail_on(problems, "out-of-bounds writes")

    try:
        config.run(out_of_bounds)
    except AssertionError:
        harness.out_of_bounds_found = True
        raise


def check_stateful(harness: EnvHarness, config: CheckConfig) -> None:
    """Random reset / step / set_state / refused-step sequences agree with the reference model."""
    # get_state_machine_test is run_state_machine_as_test's @given test, which a seed can pin
    from hypothesis.stateful import get_state_machine_test

    from kernelgym.envs.testing.stateful import env_state_machine

    test_settings = config.hypothesis_settings(max_examples=max(4, config.max_examples // 2), stateful_step_count=20)
    config.run_configured(get_state_machine_test(env_state_machine(harness), settings=test_settings))


CHECKS: tuple[Check, ...] = tuple(
    Check(name, function, (function.__doc__ or "").strip())  # no docstrings under python -OO
    for name, function in (
        # first: on cpu and cuda an out-of-bounds write corrupts memory the later checks use
        ("out_of_bounds", check_out_of_bounds),
        ("parity", check_parity),
        ("per_env_params", check_per_env_params),
        ("determinism", check_determinism),
        ("batch_invariance", check_batch_invariance),
        ("no_cross_talk", check_no_cross_talk),
        ("agent_order", check_agent_order),
        ("autoreset", check_autoreset),
        ("observations", check_observations),
        ("invariants", check_invariants),
        ("long_horizon", check_long_horizon),
        ("invalid_actions", check_invalid_actions),
        ("stateful", check_stateful),
        ("gpu_compile", check_gpu_compile),
    )
)
