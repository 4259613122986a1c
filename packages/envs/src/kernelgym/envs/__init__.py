"""kernelgym.envs."""

__version__ = "0.1.0"
