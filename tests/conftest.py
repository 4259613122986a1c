"""Integration-test setup.

Idle OpenMP threads sleep instead of spinning (as `kernelgym demo` sets for itself):
torch's and Numba's thread teams otherwise steal each other's cores between the short
steps of the training tests, which made them ten times slower on a busy 2-core
machine. OpenMP reads this once, when torch or Numba first load it, so it is set here,
before any test module imports them; a value already set by the caller wins.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
