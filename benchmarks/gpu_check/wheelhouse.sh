#!/usr/bin/env bash
# Build the wheelhouse an air-gapped GPU machine installs kernelgym from (a few MiB):
# kernelgym's five wheels, the example plugin, and the pure-Python packages such a machine
# lacks when its python holds torch, numba, numba-cuda, numpy, pytest and hypothesis.
#   bash benchmarks/gpu_check/wheelhouse.sh [FOLDER]      (default: .whl in the repository)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-$root/.whl}"
python="${PYTHON:-python3}"
mkdir -p "$out"
rm -f "$out"/*.whl
"$python" -m pip wheel --quiet --no-deps --wheel-dir "$out" \
    "$root/packages/core" "$root/packages/envs" "$root/packages/collectors" "$root/packages/memory" "$root" \
    "$root/examples/kernelgym-example-plugin"
# pure Python, py3-none-any: one wheel serves every Python and platform; pinned to the versions CI tests
"$python" -m pip download --quiet --no-deps --only-binary=:all: --dest "$out" \
    platformdirs==4.14.8 gymnasium==1.4.0 farama-notifications==0.0.6 cloudpickle==3.1.3 \
    pettingzoo==1.27.0 pytest-timeout==2.4.0
ls "$out"
du -sh "$out"
