"""Example kernelgym env plugin (filled by the envs work)."""
