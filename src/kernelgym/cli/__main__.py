"""`python -m kernelgym.cli` runs the `kernelgym` command (handy where scripts are not on PATH)."""

from kernelgym.cli.main import console

console()
