#!/usr/bin/env bash
# The test command: builds nibble normally and with AddressSanitizer+UBSan, and runs every CPU
# test in both (tests named *Slow* run in the normal build only).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs=$(nproc)
# CUDA device code for sm_90a only (the lent GPUs are Hopper; scripts/gpu.sh --stage builds the same):
# the default second architecture, sm_80, doubles the device compilation on CI's two cores.
CUDA_GENCODE=-gencode=arch=compute_90a,code=sm_90a BUILD=build scripts/build.sh
ctest --test-dir build -L cpu -j"$jobs" --output-on-failure
# -O1 -g1: the sanitizers with line numbers in their reports, at about half the compile time of -O2 -g
BUILD=build-asan scripts/build.sh -DNIBBLE_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan -L cpu -E Slow -j"$jobs" --output-on-failure
