"""What both Tag envs share: a step made of phases that run one after another.

A Tag step has phases that must not overlap: every agent moves, then every runner
checks the taggers' *new* positions, then every agent observes everyone's final
state. Each phase is a core ``@agent_kernel`` (one block per env and one thread per
agent on a GPU, a prange over envs on the cpu), and `PhasedKernel` launches them in
order. A kernel boundary is a barrier over all agents of all envs, so no phase needs
``cuda.syncthreads`` and one source serves cpu, sim and cuda. Values that several
agents write within a phase (tag counters, a tagger's reward) go through
``atomic_add``.

Each phase names in its signature only the arguments it uses; `PhasedKernel` picks
them by name from the runtime's argument list. Besides readability this keeps every
body under 30 parameters: CPython passes longer calls as ``*args``, which Numba
cannot inline.

`check_game_invariants` holds the rules both games keep, whatever the moves.
"""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np

# the leading parameters of every agent-kernel body, filled in by the launcher
_LAYOUT_PARAMETERS = ("env", "agent", "num_agents")

STEP_INPUTS = ("actions", "rng_states", "reset_mask", "obs", "rewards", "terminated")
RESET_INPUTS = ("rng_states", "reset_mask", "obs")


def kernel_arguments(inputs, spec) -> tuple[str, ...]:
    """The names of the arguments the runtime passes (see `kernelgym.envs.spec`), in order."""
    return (*inputs, *(array.name for array in spec.state), *(field.name for field in dataclasses.fields(spec.params)))


def check_game_invariants(params, state) -> None:
    """What holds in every Tag state: taggers never leave, the runners count and time agree."""
    assert np.all(state["in_game"][: params.num_taggers]), "a tagger left the game"
    in_game_runners = int(state["in_game"][params.num_taggers:].sum())
    assert int(state["runners_left"]) == in_game_runners, (
        f"runners_left {int(state['runners_left'])} but {in_game_runners} runners are in the game"
    )
    assert 0 <= int(state["timestep"]) <= params.episode_length, f"timestep {state['timestep']} out of range"


class PhasedKernel:
    """Agent kernels launched one after the other, each with the arguments it names.

    Offers what the env runtime expects of an agent-layout kernel:
    ``launch(backend, num_envs, num_agents, *args)``, plus ``cpu_launcher(num_args)``
    and ``cuda(num_envs, num_agents, *args)`` for its fast path.

    Parameters
    ----------
    argument_names : sequence of str
        The names of the arguments ``launch`` receives, in order.
    *phases : kernelgym.core.kernels.AgentKernel
        The phases, in the order they run. A phase body's parameters after
        ``(env, agent, num_agents)`` must all be in ``argument_names``.
    """

    def __init__(self, argument_names, *phases):
        if not phases:
            raise ValueError("PhasedKernel phases: expected at least one agent kernel, got none")
        position = {name: k for k, name in enumerate(argument_names)}
        self.argument_names = tuple(argument_names)
        self.phases = []
        for phase in phases:
            names = tuple(inspect.signature(phase.py_func).parameters)
            if names[:3] != _LAYOUT_PARAMETERS:
                raise TypeError(f"PhasedKernel phase {phase.__name__}: expected parameters {_LAYOUT_PARAMETERS} "
                                f"first, got {names[:3]}")
            unknown = [name for name in names[3:] if name not in position]
            if unknown:
                raise TypeError(f"PhasedKernel phase {phase.__name__}: unknown arguments {unknown}; "
                                f"expected names from {self.argument_names}")
            self.phases.append((phase, tuple(position[name] for name in names[3:])))

    def __repr__(self):
        return f"<PhasedKernel {' -> '.join(phase.__name__ for phase, _ in self.phases)}>"

    def _check_count(self, args):
        if len(args) != len(self.argument_names):
            raise TypeError(f"PhasedKernel args: expected {len(self.argument_names)} arguments "
                            f"{self.argument_names}, got {len(args)}")

    def launch(self, backend, num_envs, num_agents, *args) -> None:
        """Run every phase for every (env, agent) on ``backend`` (arguments checked by core)."""
        self._check_count(args)
        for phase, positions in self.phases:
            phase.launch(backend, num_envs, num_agents, *[args[k] for k in positions])

    def cpu_launcher(self, num_args: int):
        """A function ``f(num_envs, num_agents, *args)`` running the phases' cpu builds."""
        if num_args != len(self.argument_names):
            raise TypeError(f"PhasedKernel num_args: expected {len(self.argument_names)}, got {num_args}")
        launchers = [(phase.cpu_launcher(len(positions)), positions) for phase, positions in self.phases]

        def run_phases(num_envs, num_agents, *args):
            for launcher, positions in launchers:
                launcher(num_envs, num_agents, *[args[k] for k in positions])

        return run_phases

    def cuda(self, num_envs, num_agents, *args) -> None:
        """Launch the phases' CUDA kernels in order on the default stream (no host sync)."""
        self._check_count(args)
        for phase, positions in self.phases:
            phase.cuda(num_envs, num_agents, *[args[k] for k in positions])
