#!/usr/bin/env bash
# On a machine with no network: install kernelgym from a wheelhouse (wheelhouse.sh) into a
# folder of its own, then run the whole GPU check (check.py) with results in OUT.
#   bash benchmarks/gpu_check/run.sh [WHEELHOUSE [OUT]] [check.py options, e.g. --backend cpu --tiny]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
wheelhouse="$root/.whl"
out="$root/gpu-check-results"
if [[ $# -gt 0 && $1 != -* ]]; then wheelhouse="$1"; shift; fi
if [[ $# -gt 0 && $1 != -* ]]; then out="$1"; shift; fi
python="${PYTHON:-python3}"
# --no-deps below: kernelgym-core's `cuda` extra (numba-cuda, cuda-bindings, cuda-core) must
# already be in this python; say which is missing now rather than at the first cuda step
if [[ " $* " != *" --backend cpu "* && " $* " != *" --backend=cpu "* ]]; then
    "$python" - <<'EOF'
import importlib.util, sys

def importable(module):
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:
        return False

modules = {"numba_cuda": "numba-cuda", "cuda.bindings": "cuda-bindings", "cuda.core": "cuda-core"}
missing = [name for module, name in modules.items() if not importable(module)]
if missing:
    sys.exit(f"run.sh: {sys.executable} lacks {', '.join(missing)} (kernelgym-core's cuda extra), which "
             "the wheelhouse does not bring: install them into it, or pass --backend cpu")
EOF
fi
site="$(mktemp -d)/site"
"$python" -m pip install --quiet --no-index --no-deps --no-compile --no-cache-dir --target "$site" "$wheelhouse"/*.whl
# the commit the wheels were built from (wheelhouse.sh), in every result line
if [[ -f "$wheelhouse/COMMIT" ]]; then export KERNELGYM_COMMIT="${KERNELGYM_COMMIT:-$(cat "$wheelhouse/COMMIT")}"; fi
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$site/bin:$PATH"
exec "$python" "$root/benchmarks/gpu_check/check.py" --out "$out" "$@"
