#!/usr/bin/env bash
# The GPU run: GPU tests (ctest label gpu, i.e. test_cuda) and `nibble bench kernels`, results
# (JSON + Markdown + logs) under $OUT (default out/).
#
#   scripts/gpu.sh --stage   on a build machine with nvcc but no GPU: builds the CUDA targets in
#                            build-cuda/ and packs them with their non-system shared libraries into
#                            .carry/gpu/ (git-ignored), for a GPU machine that lacks the build deps.
#   scripts/gpu.sh [--tune]  on the GPU machine: uses .carry/gpu/ when present, else configures and
#                            builds the CUDA targets in build-gpu/ (needs the Debian deps there);
#                            --tune also runs `nibble tune` and benches with its table.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}
mkdir -p "$OUT"

if [ "${1:-}" = "--stage" ]; then
  set -e
  cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc >/dev/null
  cmake --build build-cuda --target test_cuda nibble_cli -j"${JOBS:-2}"
  rm -rf .carry/gpu && mkdir -p .carry/gpu/lib
  tar -C build-cuda -cf - nibble test_cuda | gzip -6 > .carry/gpu/bins.tar.gz
  for lib in $(ldd build-cuda/nibble build-cuda/test_cuda | awk '/=>/ {print $3}' | sort -u); do
    case "$lib" in */libc.so*|*/libm.so*|*/libdl.so*|*/libpthread.so*|*/librt.so*|*/libstdc++*|*/libgcc_s*|*/libcublas*) ;;
      *) cp -L "$lib" .carry/gpu/lib/ ;; esac
  done
  du -sh .carry/gpu
  exit 0
fi

TUNE=0
[ "${1:-}" = "--tune" ] && TUNE=1
nvidia-smi -L | tee "$OUT/device.txt"
if [ -f .carry/gpu/bins.tar.gz ]; then
  BIN=/tmp/nibble-gpu
  mkdir -p "$BIN" && tar -C "$BIN" -xzf .carry/gpu/bins.tar.gz
  # cuBLAS comes from the GPU machine's CUDA 13 (too large to carry)
  CUBLAS=$(find /usr/local /usr/lib /opt -name 'libcublas.so.13*' 2>/dev/null | head -1)
  export LD_LIBRARY_PATH="$PWD/.carry/gpu/lib:$(dirname "${CUBLAS:-/usr/local/cuda/lib64/x}"):${LD_LIBRARY_PATH:-}"
  "$BIN/test_cuda" --gtest_brief=1 2>&1 | tee "$OUT/test.log"
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
