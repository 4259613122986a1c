#!/usr/bin/env bash
# Build the wheelhouse an air-gapped GPU machine installs kernelgym from (a few MiB):
# kernelgym's six wheels (kernelgym-minatar's included), the example plugin, and the
# pure-Python packages such a machine lacks when its python holds torch, numba, numba-cuda
# (with its cuda-bindings and cuda-core: kernelgym-core's cuda extra, which run.sh checks),
# numpy, pytest and hypothesis.
#   bash benchmarks/gpu_check/wheelhouse.sh [FOLDER]      (default: .whl in the repository)
# NUMPY_FOR_PYTHON=3.12 also adds numpy 2.4.6 for that CPython on x86-64 Linux (16 MiB): the
# lent H200 image's numpy 2.5.2 breaks numba-cuda 0.30.4's import (np.row_stack is gone).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-$root/.whl}"
python="${PYTHON:-python3}"
mkdir -p "$out"
rm -f "$out"/*.whl "$out"/*.py "$out"/COMMIT
# the commit built (run.sh puts it in every result line; the GPU machine's copy has no .git)
commit="$(git -C "$root" rev-parse --short=12 HEAD)"
if [[ -n "$(git -C "$root" status --porcelain --untracked-files=no)" ]]; then commit="$commit-dirty"; fi
echo "$commit" > "$out/COMMIT"
"$python" -m pip wheel --quiet --no-deps --wheel-dir "$out" \
    "$root/packages/core" "$root/packages/envs" "$root/packages/collectors" "$root/packages/memory" "$root/packages/minatar" "$root" \
    "$root/examples/kernelgym-example-plugin"
# pure Python, py3-none-any: one wheel serves every Python and platform; pinned to the versions CI tests
"$python" -m pip download --quiet --no-deps --only-binary=:all: --dest "$out" \
    platformdirs==4.14.8 gymnasium==1.4.0 farama-notifications==0.0.6 cloudpickle==3.1.3 \
    pettingzoo==1.27.0 pytest-timeout==2.4.0
if [[ -n "${NUMPY_FOR_PYTHON:-}" ]]; then
    "$python" -m pip download --quiet --no-deps --only-binary=:all: --dest "$out" \
        --python-version "$NUMPY_FOR_PYTHON" --implementation cp --platform manylinux_2_28_x86_64 \
        --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 numpy==2.4.6
fi
ls "$out"
du -sh "$out"
