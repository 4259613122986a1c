"""The names of the kit's checks, importable without hypothesis, torch or any env.

The ``kernelgym check`` command refuses a wrong ``--checks`` name with these before it
loads anything; `kernelgym.envs.testing.CHECKS` holds the checks themselves, in this
order (a test keeps the two equal). Not named ``check_names``: a submodule of that name
would shadow the package's `check_names` function once imported.
"""

__all__ = ["CHECK_NAMES", "OPT_IN_CHECKS"]

CHECK_NAMES = (
    "out_of_bounds",
    "parity",
    "per_env_params",
    "determinism",
    "batch_invariance",
    "no_cross_talk",
    "agent_order",
    "autoreset",
    "observations",
    "invariants",
    "long_horizon",
    "invalid_actions",
    "stateful",
    "gpu_compile",
)

# checks that run only when named (``--checks fast_math`` or ``--fast-math``)
OPT_IN_CHECKS = ("fast_math",)
