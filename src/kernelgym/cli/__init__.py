"""The `kernelgym` command."""
