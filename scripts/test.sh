#!/usr/bin/env bash
# The test command: builds nibble normally and with AddressSanitizer+UBSan, and runs every CPU
# test in both (tests named *Slow* run in the normal build only).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs=$(nproc)
BUILD=build scripts/build.sh
ctest --test-dir build -L cpu -j"$jobs" --output-on-failure
BUILD=build-asan scripts/build.sh -DNIBBLE_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan -L cpu -E Slow -j"$jobs" --output-on-failure
