#!/usr/bin/env bash
# The GEMM work of one device call: GPU tests `test_cuda --gtest_filter='Gemm*'` and
# `nibble bench gemm`, logs and results under $OUT. Uses prebuilt binaries from .carry/gemm
# (built on the workstation by `scripts/gpu_gemm.sh --pack`, since the device image lacks the
# Debian -dev packages) or, when absent, builds the two targets there (Release, CUDA, -j16).
#   scripts/gpu_gemm.sh --pack      # here: build build-gemm, copy binaries + their .so into .carry/gemm
#   scripts/gpu_gemm.sh [bench args] # on the device (carry .carry/gemm)
set -uo pipefail
cd "$(dirname "$0")/.."
CARRY=.carry/gemm

if [[ "${1:-}" == "--pack" ]]; then
  set -e
  cmake -S . -B build-gemm -G Ninja -DCMAKE_BUILD_TYPE=Release -DNIBBLE_CUDA=ON \
    -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" >/dev/null
  cmake --build build-gemm --target test_cuda nibble_cli -j2
  rm -rf "$CARRY" && mkdir -p "$CARRY/bin" "$CARRY/lib"
  for b in test_cuda nibble; do strip -o "$CARRY/bin/$b" "build-gemm/$b" && gzip -6 "$CARRY/bin/$b"; done
  # Shared libraries from Debian packages (not CUDA's, not glibc's): the device image has none.
  ldd build-gemm/test_cuda build-gemm/nibble | awk '/=> \// {print $3}' | sort -u |
    grep -v -E 'libcud|libcublas|libc\.so|libm\.so|libpthread|libdl|librt|ld-linux' |
    while read -r lib; do cp -L "$lib" "$CARRY/lib/"; done
  du -sh "$CARRY"
  exit 0
fi

OUT=${OUT:-$PWD/out/gemm}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >"$OUT/gpu.txt" 2>&1
if [[ -f "$CARRY/bin/test_cuda.gz" ]]; then
  BIN=/tmp/gemm-bin
  mkdir -p "$BIN"
  for b in test_cuda nibble; do gzip -dc "$CARRY/bin/$b.gz" >"$BIN/$b" && chmod +x "$BIN/$b"; done
  export LD_LIBRARY_PATH="$PWD/$CARRY/lib:${LD_LIBRARY_PATH:-}"
  "$BIN/test_cuda" --gtest_list_tests >/dev/null || { ldd "$BIN/test_cuda"; exit 1; }
else
  BIN=build-gpu-gemm
  cmake -S . -B "$BIN" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNIBBLE_CUDA=ON >"$OUT/build.log" 2>&1 &&
    cmake --build "$BIN" --target test_cuda nibble_cli -j16 >>"$OUT/build.log" 2>&1 ||
    { tail -40 "$OUT/build.log"; exit 1; }
fi

echo "== tests"
"$BIN/test_cuda" --gtest_filter='Gemm*' >"$OUT/test.log" 2>&1
test_rc=$?
grep -E '^\[  (FAILED|PASSED) |^\[==========\]|Failure|seed' "$OUT/test.log" | head -40

echo "== bench"
day=$(date -u +%F)
"$BIN/nibble" bench gemm "$@" --json "$OUT/gemm-$day.json" --md "$OUT/gemm-$day.md" 2>"$OUT/bench.log" >"$OUT/bench.out"
bench_rc=$?
tail -5 "$OUT/bench.log"
sed -n '/## Targets/,$p' "$OUT/bench.out"
if [[ -n "${GEMM_NCU:-}" ]]; then  # one profiled launch: GEMM_NCU="nestedfp 2048" (format, M)
  read -r fmt m <<<"$GEMM_NCU"
  ncu -k regex:gemm_kernel --launch-skip 3 --launch-count 1 --section SpeedOfLight --section Occupancy \
    --section WarpStateStats --section MemoryWorkloadAnalysis --section LaunchStats \
    "$BIN/nibble" bench gemm --shapes llama --formats "$fmt" --m "$m" >"$OUT/ncu.txt" 2>&1
  grep -E "Duration|Throughput|Achieved Occupancy|Theoretical Occupancy|Stall|Registers|Shared Memory Configuration|Block Limit" "$OUT/ncu.txt" | head -40
fi
echo "tests rc=$test_rc bench rc=$bench_rc"
exit $((test_rc | bench_rc))
