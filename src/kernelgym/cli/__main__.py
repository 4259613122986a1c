"""`python -m kernelgym.cli` runs the `kernelgym` command (handy where scripts are not on PATH)."""

import sys

from kernelgym.cli.main import main

sys.exit(main())
