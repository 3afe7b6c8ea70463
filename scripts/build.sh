#!/usr/bin/env bash
# Configures and builds nibble into build/ (CUDA kernels too when nvcc is found).
# Usage: [CUDA_GENCODE='-gencode=...;...'] scripts/build.sh [extra cmake args...]
# CUDA_GENCODE: the nvcc -gencode list (default: CMakeLists.txt's, sm_90a and sm_80).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${CUDACXX:-}" ] && ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi
BUILD=${BUILD:-build}
gencode=(-UNIBBLE_CUDA_GENCODE)  # back to the default where an earlier call cached another list
[ -n "${CUDA_GENCODE:-}" ] && gencode=("-DNIBBLE_CUDA_GENCODE=$CUDA_GENCODE")
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release "${gencode[@]}" "$@" >/dev/null
cmake --build "$BUILD" -j"$(nproc)"
