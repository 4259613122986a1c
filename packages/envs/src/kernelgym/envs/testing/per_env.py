"""The kit's ``per_env_params`` check: each env runs exactly as the reference built with its own params.

For an env that declares `EnvSpec.per_env_params`, hypothesis draws a value per env and
field (`per_env_values`: the default times a factor in [0.8, 1.2]), writes them with
``set_params`` and holds a step (or the reset of the envs pending one) of every env to
the reference built with that env's own params record. An env-layout env is also made
with ``randomize=`` ranges drawn the same way: each env's reset must draw its fields from
its own stream before the reference's reset draws (`kernelgym.envs.runtime.params.reference_draw`),
then step as the reference with those params. Comparisons are exact, as in ``parity``.
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from kernelgym.envs.runtime.params import reference_draw
from kernelgym.envs.spec import PRECISIONS
from kernelgym.envs.testing import strategies
from kernelgym.envs.testing.harness import EnvHarness, env_slice, fail_on
from kernelgym.envs.testing.report import CheckSkipped

__all__ = ["check_per_env_params", "per_env_values"]

FACTORS = (0.8, 1.2)  # per-env values: the default times a factor in this range


def per_env_values(params, fields, num_envs: int, ranges=None) -> st.SearchStrategy[dict]:
    """``{field: (num_envs,) float64 array}``: each field's value in ``params`` times a factor in `FACTORS`,
    or, for a field in ``ranges`` (`EnvSpec.param_ranges`), a value in its range, the ends included."""
    ranges = ranges or {}

    def column(name):
        if name in ranges:
            values = strategies.range_values(*ranges[name])
            return st.lists(values, min_size=num_envs, max_size=num_envs).map(np.array)
        base = float(getattr(params, name))
        return st.lists(st.floats(*FACTORS), min_size=num_envs, max_size=num_envs).map(
            lambda factors: base * np.array(factors)
        )

    return st.fixed_dictionaries({name: column(name) for name in fields})


def check_per_env_params(harness: EnvHarness, config) -> None:
    """Per-env params (set_params and randomize=) give each env exactly its own reference's dynamics."""
    spec = harness.spec
    if not spec.per_env_params:
        raise CheckSkipped("the env declares no per-env params (EnvSpec.per_env_params)")
    batches = strategies.batches(spec, harness.params, harness.backend)
    randomize = spec.kernel_layout == "env"

    @given(batch=batches, seed=strategies.seeds(), data=st.data())
    def per_env(batch, seed, data):
        n = batch.num_envs
        env = harness.make_env(n, seed, max_episode_steps=1, fresh=True)
        try:
            env.set_params(
                **data.draw(per_env_values(harness.params, spec.per_env_params, n, spec.param_ranges), label="values")
            )
            prev = harness.load_batch(env, batch, seed)
            fail_on(
                _step_problems(harness, env, batch, prev),
                "set_params: an env differs from the reference built with its own params",
            )
        finally:
            env.close()
        if not randomize:
            return
        fields = data.draw(st.lists(st.sampled_from(spec.per_env_params), min_size=1, unique=True), label="fields")
        ranges = {
            name: tuple(
                sorted(
                    float(getattr(harness.params, name)) * factor
                    for factor in data.draw(st.tuples(st.floats(*FACTORS), st.floats(*FACTORS)), label=name)
                )
            )
            for name in fields
        }
        fail_on(
            _randomize_problems(harness, n, seed, ranges, batch.actions),
            f"randomize={ranges}: an env's draw or dynamics differ from its reference's",
        )

    config.run(per_env)


def _harness_for(harness: EnvHarness, params) -> EnvHarness:
    """``harness`` comparing with the reference built with ``params``."""
    clone = copy.copy(harness)
    clone.params = params
    return clone


def _env_params(harness, env, index: int):
    return dataclasses.replace(
        harness.params, **{name: float(values[index]) for name, values in env.get_params().items()}
    )


def _step_problems(harness, env, batch, prev) -> list[str]:
    streams = env.get_rng_states()
    result = harness.step(env, batch.actions)
    problems = []
    for index in range(batch.num_envs):
        own = _harness_for(harness, _env_params(harness, env, index))
        new_state, prev_env = result.env_slice(index), env_slice(prev, index)
        obs, reward, terminated = result.obs[index], result.rewards[index], result.terminated[index]
        if batch.pending[index]:
            found = own.reset_problems(
                new_state, obs, reward, terminated, streams[index], result.rng[index], previous=prev_env
            )
        else:
            found = own.step_problems(
                prev_env, batch.actions[index], streams[index], new_state, obs, reward, terminated, result.rng[index]
            )
        if found:
            problems.append(harness.env_problem(index, found + [f"its params {own.params}"], prev_env))
    return problems


def _randomize_problems(harness, num_envs: int, seed: int, ranges: dict, actions) -> list[str]:
    from kernelgym.envs.vector_env import KernelVectorEnv

    kwargs = (
        harness.overrides
        if harness.overrides is not None
        else {field.name: getattr(harness.params, field.name) for field in dataclasses.fields(harness.params)}
    )
    env = KernelVectorEnv(
        harness.spec,
        num_envs,
        backend=harness.backend,
        seed=seed,
        max_episode_steps=1,
        precision=harness.precision,
        randomize=ranges,
        **kwargs,
    )
    real = PRECISIONS[harness.precision] if harness.precision is not None else np.float64
    try:
        rows = harness.seed_streams(seed, num_envs)
        env.reset(seed=seed, numpy=True)
        start, after = env.get_state(), env.get_rng_states()
        problems = []
        for index in range(num_envs):
            stream = np.array(rows[index], dtype=np.uint64).reshape(1, 2)
            drawn = reference_draw(harness.spec, harness.params, ranges, stream, real)
            own = _harness_for(harness, drawn)
            # the drawn fields only: the others are the table's, rounded to the precision the reference casts to
            got = {name: getattr(env.env_params(index), name) for name in ranges}
            want = {name: getattr(drawn, name) for name in ranges}
            found = [] if got == want else [f"drew {got}, the reference's draw gives {want}"]
            found += own.start_state_problems(env_slice(start, index), stream.reshape(2), after[index])
            if found:
                problems.append(harness.env_problem(index, found))
        if problems:
            return problems
        batch = strategies.Batch(tuple(env_slice(start, i) for i in range(num_envs)), actions, (False,) * num_envs)
        return _step_problems(harness, env, batch, start)
    finally:
        env.close()
