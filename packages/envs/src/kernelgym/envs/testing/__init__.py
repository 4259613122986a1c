"""Property tests for kernelgym envs: one function, one test class, or one command.

```python
from kernelgym.envs.testing import check_env, format_report

report = check_env("MyEnv-v0", backend="cpu", max_examples=20)
print(format_report(report))          # or: kernelgym check MyEnv-v0

# in a test module (pytest):
from kernelgym.envs.testing import EnvTestSuite

class TestMyEnv(EnvTestSuite):
    env_id = "MyEnv-v0"
```

Every check is a hypothesis property of the env's kernels against its CPU reference
(``EnvSpec.reference``): one-step parity (and, for envs declaring per-env params, each
env's parity with the reference built with its own params), determinism, batch invariance, no cross-talk
between envs, no dependence on the order an env's agents run in (on the cpu twin: a race on
a GPU), autoreset semantics, observation bounds, the spec's invariants, invalid
actions, out-of-bounds writes and a stateful random walk over reset/step/set_state.

What an env must provide: its ``EnvSpec.reference`` (a plain numpy version of one env);
optionally ``state_strategy`` (hypothesis states to start from; default: states reached
by random reference rollouts) and ``invariants`` (rules every state keeps). A stochastic
step is fine: the kernel's transition must then be one the reference can draw with some
generator. Failures come with hypothesis's shrunk example and the seed that reproduces
them (``kernelgym check ENV_ID --seed N``).
"""

import importlib

# name -> module: imported on first use, so that the pytest plugin (a submodule, loaded in
# every pytest run) does not pull in hypothesis, the kit or the env runtime.
_EXPORTS = {
    "CHECKS": "checks",
    "Check": "checks",
    "CheckConfig": "checks",
    "CheckResult": "report",
    "DEFAULT_MAX_EXAMPLES": "runner",
    "EnvHarness": "harness",
    "EnvTestSuite": "suite",
    "Report": "report",
    "check_env": "runner",
    "check_names": "runner",
    "format_report": "report",
    "main_check": "cli",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'kernelgym.envs.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"kernelgym.envs.testing.{_EXPORTS[name]}"), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
