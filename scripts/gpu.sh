#!/usr/bin/env bash
# The GPU run: GPU tests (ctest label gpu, i.e. test_cuda) and `nibble bench kernels`, results
# (JSON + Markdown + logs) under $OUT (default out/).
#
#   scripts/gpu.sh --stage   on a build machine with nvcc but no GPU: builds the CUDA targets in
#                            $BUILD (build-cuda/) and packs them with their non-system shared
#                            libraries into $CARRY (.carry/gpu/, git-ignored), for a GPU machine
#                            that lacks the build deps. $TARGETS overrides the targets packed.
#   scripts/gpu.sh [--tune]  on the GPU machine: uses .carry/gpu/ when present, else configures and
#                            builds the CUDA targets in build-gpu/ (needs the Debian deps there);
#                            --tune also runs `nibble tune` and benches with its table.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}
mkdir -p "$OUT"

if [ "${1:-}" = "--stage" ]; then
  set -e
  BUILD=${BUILD:-build-cuda} CARRY=${CARRY:-.carry/gpu}
  TARGETS=${TARGETS:-$(echo test_cuda; ls -d tests/cuda_* 2>/dev/null | sed 's|tests/|test_|'; echo nibble_cli)}
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc >/dev/null
  cmake --build "$BUILD" --target $TARGETS -j"${JOBS:-2}"
  BINS=$(for t in $TARGETS; do [ "$t" = nibble_cli ] && echo nibble || echo "$t"; done)
  rm -rf "$CARRY" && mkdir -p "$CARRY/lib"
  tar -C "$BUILD" -cf - $BINS | gzip -6 > "$CARRY/bins.tar.gz"
  for lib in $(cd "$BUILD" && ldd $BINS | awk '/=>/ {print $3}' | sort -u); do
    case "$lib" in */libc.so*|*/libm.so*|*/libdl.so*|*/libpthread.so*|*/librt.so*|*/libstdc++*|*/libgcc_s*|*/libcublas*) ;;
      *) cp -L "$lib" "$CARRY/lib/" ;; esac
  done
  du -sh "$CARRY"
  exit 0
fi

TUNE=0
[ "${1:-}" = "--tune" ] && TUNE=1
nvidia-smi -L | tee "$OUT/device.txt"
if [ -f .carry/gpu/bins.tar.gz ]; then
  CARRY=.carry/gpu source scripts/gpu_env.sh
  for t in "$BIN"/test_cuda*; do "$t" --gtest_brief=1; done 2>&1 | tee "$OUT/test.log"
else
  BIN=build-gpu
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release >"$OUT/build.log" 2>&1 &&
    cmake --build build-gpu --target test_cuda nibble_cli -j16 >>"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
  ctest --test-dir build-gpu -L gpu --output-on-failure 2>&1 | tee "$OUT/test.log"
fi
TUNING=()
if [ "$TUNE" = 1 ]; then
  "$BIN/nibble" tune --out "$OUT/tuning.json" > "$OUT/tune.log" 2>&1 && TUNING=(--tuning "$OUT/tuning.json")
fi
"$BIN/nibble" bench kernels --json "$OUT/kernels.json" --md "$OUT/kernels.md" "${TUNING[@]}" 2> "$OUT/bench.log"
