"""What both Tag envs share: a step made of phases that run one after another.

A Tag step has phases that must not overlap: every agent moves, then every runner
checks the taggers' *new* positions, then every agent observes everyone's final
state. Each phase is a core ``@agent_kernel`` (one block per env and one thread per
agent on a GPU, a prange over envs on the cpu), and `PhasedKernel` launches them in
order with the same arguments. A kernel boundary is a barrier over all agents of all
envs, so no phase needs ``cuda.syncthreads`` and one source serves cpu, sim and cuda.
Values that several agents write within a phase (tag counters, a tagger's reward)
go through ``atomic_add``.
"""

from __future__ import annotations


class PhasedKernel:
    """Agent kernels launched one after the other with the same arguments.

    Offers the interface the env runtime expects of an agent-layout kernel:
    ``launch(backend, num_envs, num_agents, *args)``, plus ``cpu_launcher(num_args)``
    and ``cuda(num_envs, num_agents, *args)`` for its fast path.

    Parameters
    ----------
    *phases : kernelgym.core.kernels.AgentKernel
        The phases, in the order they run.
    """

    def __init__(self, *phases):
        if not phases:
            raise ValueError("PhasedKernel phases: expected at least one agent kernel, got none")
        self.phases = phases

    def __repr__(self):
        return f"<PhasedKernel {' -> '.join(phase.__name__ for phase in self.phases)}>"

    def launch(self, backend, num_envs, num_agents, *args) -> None:
        """Run every phase for every (env, agent) on ``backend`` (arguments checked by core)."""
        for phase in self.phases:
            phase.launch(backend, num_envs, num_agents, *args)

    def cpu_launcher(self, num_args: int):
        """A function ``f(num_envs, num_agents, *args)`` running the phases' cpu builds."""
        launchers = [phase.cpu_launcher(num_args) for phase in self.phases]

        def run_phases(num_envs, num_agents, *args):
            for launcher in launchers:
                launcher(num_envs, num_agents, *args)

        return run_phases

    def cuda(self, num_envs, num_agents, *args) -> None:
        """Launch the phases' CUDA kernels in order on the default stream (no host sync)."""
        for phase in self.phases:
            phase.cuda(num_envs, num_agents, *args)

