"""The kit's opt-in ``fast_math`` check: the fast-math build within its stated tolerance.

``make(..., fast_math=True)`` compiles an env's kernels with FMA contraction on: on cuda
NVVM fuses ``a * b + c`` into one ``fma.rn`` (one rounding instead of two), so results
leave the default build's bits. No GPU is needed to bound how far: the fast-math build's
cpu launchers are the FMA-contracting twin (numba ``fastmath={"contract"}``: LLVM fuses
multiply-adds on a CPU with FMA, as NVVM does on a GPU, though not always the same pairs).
The check steps the twin and the default cpu build from the same reached states (random
rollouts of up to `MAX_WARMUP_STEPS` steps at the env's own time limit) with the same
actions for `HORIZON` steps and requires every observation and reward (and the reset
observations) within `FAST_MATH_TOLERANCE` of the env's precision. The bound is for
reached states: from arbitrary states of a chaotic env (Acrobot at its velocity bounds) a
last-bit difference grows much faster, as float32 against float64 does. On a CPU that cannot
fuse, the twin equals the default build and proves nothing: the check then says so and
is skipped.

``kernelgym check ENV_ID --fast-math`` (or ``--checks fast_math``) and
``check_env(..., fast_math=True)`` run it; it always runs on the cpu backend.
"""

from __future__ import annotations

from fractions import Fraction

import numba
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from kernelgym.envs.testing import strategies
from kernelgym.envs.testing.checks import Check, CheckConfig
from kernelgym.envs.testing.harness import EnvHarness, _fields, flat_obs
from kernelgym.envs.testing.report import CheckSkipped

__all__ = [
    "FAST_MATH_CHECK",
    "FAST_MATH_TOLERANCE",
    "HORIZON",
    "MAX_WARMUP_STEPS",
    "NO_FMA",
    "check_fast_math",
    "cpu_fuses",
    "fast_math_tolerance",
]

# (rtol, atol) per arithmetic precision: a fast-math value x and the default build's y agree
# when |x - y| <= atol + rtol * |y|. Measured worst over the four classic envs, 10 steps from
# states reached by random rollouts of 8 to 490 steps (about 10^5 states a precision):
# float32 |x - y| = 3.7e-5, at most 1.5e-5 x (1 + |y|) (Pendulum's cos/sin of an angle grown
# to tens of radians); float64 no value differed (the state is stored in float32, which rounds
# a float64 ulp away; where it does not, one float32 ulp grows as in a float32 build).
FAST_MATH_TOLERANCE = {"float64": (1e-4, 1e-4), "float32": (1e-4, 1e-4)}
HORIZON = 10
# random steps of the default build before the comparison (drawn up to this many): states an agent reaches
MAX_WARMUP_STEPS = 300
NUM_ENVS = 1024
NO_FMA = (
    "this CPU did not fuse a * b + c under numba's fastmath={'contract'} (no FMA hardware?): the "
    "fast-math cpu twin rounds like the default build here and proves nothing about a GPU's fma.rn; "
    "run the fast-math check on an x86-64 CPU with FMA (Haswell or later) or on arm64"
)

_PROBE_SCALE, _PROBE_SHIFT = 1.1, -0.3
_PROBES = np.linspace(-3.0, 3.0, 61)


@numba.njit(fastmath={"contract"})
def _contracted_affine(x, scale, shift):
    return x * scale + shift


def cpu_fuses() -> bool:
    """Whether numba's ``fastmath={"contract"}`` fuses ``x * scale + shift`` on this CPU.

    True when every probe gives the once-rounded result (exact rational arithmetic
    rounded to float64), where rounding twice gives a different one for many probes.
    """
    fused = [float(Fraction(x) * Fraction(_PROBE_SCALE) + Fraction(_PROBE_SHIFT)) for x in _PROBES.tolist()]
    return [_contracted_affine(x, _PROBE_SCALE, _PROBE_SHIFT) for x in _PROBES.tolist()] == fused


def fast_math_tolerance(harness: EnvHarness) -> tuple[str, float, float]:
    """``(precision, rtol, atol)`` for an env: its precision's, else its narrowest float state's."""
    precision = harness.precision
    if precision is None:
        widths = [np.dtype(dtype).itemsize for dtype in harness.state_dtypes.values() if np.dtype(dtype).kind == "f"]
        precision = "float64" if widths and min(widths) >= 8 else "float32"
    return (precision, *FAST_MATH_TOLERANCE[precision])


def _outside(fast: np.ndarray, default: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    fast, default = np.asarray(fast, np.float64), np.asarray(default, np.float64)
    outside = np.abs(fast - default) > atol + rtol * np.abs(default)
    return outside & ~(np.isnan(fast) & np.isnan(default))


def check_fast_math(harness: EnvHarness, config: CheckConfig) -> str:
    """The fast-math build (FMA contraction on) stays within the stated tolerance of the default build."""
    if not cpu_fuses():
        raise CheckSkipped(NO_FMA)
    from kernelgym.envs.vector_env import KernelVectorEnv

    precision, rtol, atol = fast_math_tolerance(harness)
    kwargs = harness.overrides if harness.overrides is not None else _fields(harness.params)
    envs = {
        fast_math: KernelVectorEnv(
            harness.spec, NUM_ENVS, backend="cpu", seed=0, precision=harness.precision, fast_math=fast_math, **kwargs
        )
        for fast_math in (False, True)
    }
    default = envs[False]
    prefix = (NUM_ENVS, *harness.agent_shape)
    seen = {"values": 0, "differing": 0, "worst": 0.0, "flips": 0}

    def compare(what: str, fast, expected, compared: np.ndarray) -> None:
        fast, expected = np.asarray(fast)[compared], np.asarray(expected)[compared]
        difference = np.abs(fast.astype(np.float64) - expected.astype(np.float64))
        seen["values"] += difference.size
        seen["differing"] += int(np.count_nonzero(difference > 0))
        seen["worst"] = max(seen["worst"], float(np.nanmax(difference, initial=0.0)))
        outside = _outside(fast, expected, rtol, atol)
        if outside.any():
            first = tuple(np.argwhere(outside)[0])
            env = int(np.flatnonzero(compared)[first[0]])
            raise AssertionError(
                f"{what}: {int(outside.sum())} values outside the fast-math tolerance ({precision}: rtol {rtol}, "
                f"atol {atol}); first: env {env}, index {first[1:]}: fast-math {fast[first]!r}, default "
                f"{expected[first]!r}, |difference| {abs(float(fast[first]) - float(expected[first])):.3g}"
            )

    @given(seed=strategies.seeds(), warmup=st.integers(0, MAX_WARMUP_STEPS))
    def fast_math(seed, warmup):
        resets = [
            flat_obs(harness.observation_space, env.reset(seed=seed, numpy=True)[0]) for env in (envs[True], default)
        ]
        alive = np.ones(NUM_ENVS, bool)
        compare("reset observations", *resets, alive)
        generator = np.random.default_rng(seed)
        for _ in range(warmup):
            default.step(strategies.random_actions(harness.action_space, prefix, generator), numpy=True)
        state, streams = default.get_state(), default.get_rng_states()
        for env in envs.values():
            env.set_state(state, check_invariants=False)  # both step next (set_state also clears a pending reset)
            env.set_rng_states(streams)
        for step in range(HORIZON):
            actions = strategies.random_actions(harness.action_space, prefix, generator)
            (obs, rewards, terminated, truncated, _), (want_obs, want_rewards, want_terminated, _, _) = (
                env.step(actions, numpy=True) for env in (envs[True], default)
            )
            compare(
                f"step {step + 1} observations",
                flat_obs(harness.observation_space, obs),
                flat_obs(harness.observation_space, want_obs),
                alive,
            )
            compare(f"step {step + 1} rewards", rewards, want_rewards, alive)
            # a state within the tolerance of a termination boundary may end in one build only:
            # compared no further (the next step resets it in one build)
            seen["flips"] += int(np.count_nonzero((terminated != want_terminated) & alive))
            alive &= ~(terminated | want_terminated | truncated)  # truncated: the same step counters

    config.run(fast_math)
    return (
        f"cpu twin, {precision}: rtol {rtol}, atol {atol}; worst |difference| {seen['worst']:.3g} in "
        f"{seen['values']} values, {seen['differing']} differed, {seen['flips']} terminations differed"
    )


FAST_MATH_CHECK = Check("fast_math", check_fast_math, (check_fast_math.__doc__ or "").strip())
