#!/usr/bin/env bash
# The one GPU script: build + pack here, run parts on the GPU machine, record the results here.
#
#   scripts/gpu.sh --stage         on a build machine with nvcc but no GPU: builds the CUDA targets in
#                                  $BUILD (build-cuda/; sm_90a only, $GENCODE overrides the nvcc
#                                  -gencode list) and packs them with their non-system shared
#                                  libraries into $CARRY (.carry/gpu/, git-ignored), for a GPU machine
#                                  that lacks the build deps (+ the stand-in tokenizer as data/, which
#                                  gpu_env.sh makes NIBBLE_DATA). $TARGETS overrides the targets packed.
#   scripts/gpu.sh [PART...]       on the GPU machine (binaries from $CARRY when packed there, else it
#                                  configures and builds build-gpu/, which needs the Debian deps). Parts:
#                                    tests    every GPU test binary (test_cuda*)
#                                    kernels  nibble bench kernels (GEMV)
#                                    chain    nibble bench chain (kernel boundaries in a graph of streaming kernels)
#                                    gemm     nibble bench gemm (GEMM_NCU="FORMAT M": + one ncu profile)
#                                    tune     nibble tune; later benches in the run use its table
#                                    ab       same-call A/B against the build staged in $AB_OLD (.carry/old:
#                                             `CARRY=.carry/old scripts/gpu.sh --stage` on the old commit):
#                                             $AB_KERNELS (nibble bench kernels args) and $AB_E2E (nibble bench
#                                             e2e args, the model from $E2E_ARCHS' first arch) run old, new, old,
#                                             new; $OUT/ab.md joins them (scripts/ab_compare.py)
#                                    sweep    environment switches on the kernels: for each ';'-separated
#                                             setting of $SWEEP_ENVS (e.g. "NIBBLE_RING_CPW=1;NIBBLE_RING_SPIN=3")
#                                             `nibble bench kernels $SWEEP_KERNELS` without and with it,
#                                             alternated twice; $OUT/sweep.md joins each (ab_compare.py)
#                                    steps    where one decode step's time goes: ncu times every kernel of
#                                             `nibble bench e2e` ($STEPS_FORMAT nvfp4, batch $STEPS_BATCH 1) on
#                                             the first of $E2E_ARCHS, scripts/step_kernels.py -> $OUT/steps.md
#                                    e2e      nibble init-random for $E2E_ARCHS (llama-3.1-8b qwen3-8b) into
#                                             $E2E_DIR (/tmp/nibble-random; kept if already there), then
#                                             nibble bench e2e on .carry/house (if carried) and on them
#                                             ($E2E_LAYERS: shallower models of the same width, for a quick check)
#                                  Default: tests chain kernels gemm e2e, each skipped when less than its rough
#                                  need is left of $GPU_BUDGET_S (540 s); e2e gets the rest as --time-limit.
#                                  --tune = tests tune kernels (as before). $E2E_FORMATS, $E2E_ARGS, $KERNELS_ARGS,
#                                  $GEMM_ARGS pass options on. Results: $OUT/<bench>.json, .md, .log.
#   scripts/gpu.sh --record DIR    here, after a run: copies DIR/<bench>.json and .md (kernels, gemm,
#                                  e2e) to docs/perf/<bench>-<date>.{json,md} (date from the rows; -2, -3
#                                  when that name holds another run) and merges its rows into
#                                  docs/perf/<bench>-latest.json (the newest measurement of every point,
#                                  each row naming its run: scripts/perf_latest.py).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}
CARRY=${CARRY:-.carry/gpu}

stage() {
  set -e
  local build=${BUILD:-build-cuda}
  local targets=${TARGETS:-$(echo test_cuda; ls -d tests/cuda_* 2>/dev/null | sed 's|tests/|test_|'; echo nibble_cli)}
  # sm_90a only (the lent GPUs are Hopper): half the device code of the default two-arch build, so
  # the packed binaries stay well under a call's 64 MiB carry
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc \
    "-DNIBBLE_CUDA_GENCODE=${GENCODE:--gencode=arch=compute_90a,code=sm_90a}" >/dev/null
  cmake --build "$build" --target $targets -j"${JOBS:-2}"
  local bins
  bins=$(for t in $targets; do [ "$t" = nibble_cli ] && echo nibble || echo "$t"; done)
  rm -rf "$CARRY" && mkdir -p "$CARRY/lib"
  tar -C "$build" -cf - $bins | gzip -6 > "$CARRY/bins.tar.gz"
  for lib in $(cd "$build" && ldd $bins | awk '/=>/ {print $3}' | sort -u); do
    case "$lib" in */libc.so*|*/libm.so*|*/libdl.so*|*/libpthread.so*|*/librt.so*|*/libstdc++*|*/libgcc_s*|*/libcublas*) ;;
      *) cp -L "$lib" "$CARRY/lib/" ;; esac
  done
  # the stand-in tokenizer of `nibble init-random` (and of the GPU tests' tiny models): 2 MB
  local tok=${NIBBLE_DATA:-../shared/data}/models/smollm2-135m-instruct-tokenizer
  if [ -d "$tok" ]; then
    mkdir -p "$CARRY/data/models" && cp -r "$tok" "$CARRY/data/models/" && chmod -R u+w "$CARRY/data"
  fi
  # the start of house-val (300 KB), for the GPU perplexity tests
  local val=${NIBBLE_DATA:-../shared/data}/text/house-val/house-val.txt
  if [ -f "$val" ]; then
    mkdir -p "$CARRY/data/text/house-val" && head -c 300000 "$val" > "$CARRY/data/text/house-val/house-val.txt"
  fi
  du -sh "$CARRY"
}

record() {
  local run=$1 bench date name n
  [ -d "$run" ] || { echo "gpu.sh --record: no directory $run" >&2; exit 1; }
  mkdir -p docs/perf
  for bench in kernels gemm e2e; do
    [ -f "$run/$bench.json" ] || continue
    date=$(grep -o '"date": *"[0-9-]*"' "$run/$bench.json" | head -1 | grep -o '[0-9]\{4\}-[0-9-]*')
    [ -n "$date" ] || { echo "gpu.sh --record: $run/$bench.json has no \"date\" field" >&2; exit 1; }
    name=$bench-$date n=1
    while [ -f "docs/perf/$name.json" ] && ! cmp -s "$run/$bench.json" "docs/perf/$name.json"; do
      n=$((n + 1)) name=$bench-$date-$n
    done
    cp "$run/$bench.json" "docs/perf/$name.json"
    [ -f "$run/$bench.md" ] && cp "$run/$bench.md" "docs/perf/$name.md"
    local latest=docs/perf/$bench-latest.json
    python3 scripts/perf_latest.py "$bench" "$latest" $([ -f "$latest" ] && echo "$latest") "docs/perf/$name.json" || exit 1
    echo "recorded docs/perf/$name.{json,md} and merged it into $latest"
  done
}

# $BIN: the carried binaries, or a build here
setup_bin() {
  if [ -f "$CARRY/bins.tar.gz" ]; then
    source scripts/gpu_env.sh
  else
    BIN=build-gpu
    cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release >"$OUT/build.log" 2>&1 &&
      cmake --build build-gpu --target test_cuda nibble_cli -j16 >>"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
    for d in tests/cuda_*; do [ -d "$d" ] && cmake --build build-gpu --target "test_${d#tests/}" -j16 >>"$OUT/build.log" 2>&1; done
  fi
}

TUNING=()
part_tests() {
  (
    rc=0
    for t in "$BIN"/test_cuda*; do
      echo "== $(basename "$t")"
      timeout 600 "$t" --gtest_brief=1 || rc=1
    done
    # the stream kernel's other ring shapes (its chunks per warp and stage, its waits; gemv_args.h)
    echo "== test_cuda GemvStream, NIBBLE_RING_CPW=1 NIBBLE_RING_SPIN=3"
    NIBBLE_RING_CPW=1 NIBBLE_RING_SPIN=3 timeout 300 "$BIN/test_cuda" --gtest_brief=1 --gtest_filter='GemvStream*' || rc=1
    exit $rc
  ) 2>&1 | tee "$OUT/tests.log"
  return "${PIPESTATUS[0]}"
}
part_tune() {
  "$BIN/nibble" tune --out "$OUT/tuning.json" >"$OUT/tune.log" 2>&1 && TUNING=(--tuning "$OUT/tuning.json")
}
part_kernels() {
  "$BIN/nibble" bench kernels --json "$OUT/kernels.json" --md "$OUT/kernels.md" "${TUNING[@]}" ${KERNELS_ARGS:-} 2>"$OUT/kernels.log"
}
part_chain() {
  "$BIN/nibble" bench chain --json "$OUT/chain.json" --md "$OUT/chain.md" 2>"$OUT/chain.log" | grep '^|'
}
part_gemm() {
  "$BIN/nibble" bench gemm --json "$OUT/gemm.json" --md "$OUT/gemm.md" ${GEMM_ARGS:-} 2>"$OUT/gemm.log" >"$OUT/gemm.out"
  local rc=$?
  sed -n '/## Targets/,$p' "$OUT/gemm.out"
  if [ -n "${GEMM_NCU:-}" ]; then  # one profiled launch: GEMM_NCU="nestedfp 2048" (format, M)
    read -r fmt m <<<"$GEMM_NCU"
    ncu -k 'regex:gemm_kernel|rega_kernel' --launch-skip 3 --launch-count 1 --section SpeedOfLight --section Occupancy \
      --section WarpStateStats --section MemoryWorkloadAnalysis --section LaunchStats \
      "$BIN/nibble" bench gemm --shapes llama --formats "$fmt" --m "$m" >"$OUT/ncu.txt" 2>&1
    grep -E "Duration|Throughput|Achieved Occupancy|Theoretical Occupancy|Stall|Registers|Block Limit" "$OUT/ncu.txt" | head -40
  fi
  return $rc
}
# The random-weight model of architecture $1 (with $2 layers if given) in $E2E_DIR, written by
# `nibble init-random` unless already there; prints its directory.
random_model() {
  local m=${E2E_DIR:-/tmp/nibble-random}/$1${2:+-$2-layers}
  if ! [ -f "$m/model.safetensors.index.json" ] && ! [ -f "$m/model.safetensors" ]; then  # written last
    rm -rf "$m"
    "$BIN/nibble" init-random --arch "$1" -o "$m" --seed 1 ${2:+--layers $2} >>"$OUT/init-random.log" 2>&1 || return 1
  fi
  echo "$m"
}
first_arch() { set -- ${E2E_ARCHS-llama-3.1-8b}; echo "${1:-llama-3.1-8b}"; }

part_e2e() {
  local models=() arch m
  [ -f .carry/house/config.json ] && models+=(.carry/house)
  for arch in ${E2E_ARCHS-llama-3.1-8b qwen3-8b}; do  # E2E_ARCHS="": the house model only
    m=$(random_model "$arch" "${E2E_LAYERS:-}") || { tail -5 "$OUT/init-random.log"; return 1; }
    models+=("$m")
  done
  local formats=()
  [ -n "${E2E_FORMATS:-}" ] && formats=(--formats "$E2E_FORMATS")
  "$BIN/nibble" bench e2e -m "$(IFS=,; echo "${models[*]}")" "${formats[@]}" "${TUNING[@]}" \
    --time-limit "$(left)" --json "$OUT/e2e.json" --md "$OUT/e2e.md" ${E2E_ARGS:-} 2>"$OUT/e2e.log"
}

part_ab() {
  local old=/tmp/nibble-ab-old bench v i args m=""
  mkdir -p "$old" && tar -C "$old" -xzf "${AB_OLD:-.carry/old}/bins.tar.gz" || return 1
  if [ -n "${AB_E2E:-}" ]; then m=$(random_model "$(first_arch)") || return 1; fi
  : >"$OUT/ab.md"
  for bench in kernels e2e; do
    args=$([ $bench = kernels ] && echo "${AB_KERNELS:-}" || echo "${AB_E2E:-}")
    [ -n "$args" ] || continue
    [ $bench = e2e ] && args="-m $m $args"
    for i in 1 2; do
      for v in old new; do
        "$([ $v = old ] && echo "$old" || echo "$BIN")/nibble" bench $bench $args --md "/tmp/ab-$bench-$v$i.md" \
          >>"$OUT/ab.log" 2>&1 || { tail -5 "$OUT/ab.log"; return 1; }
      done
    done
    { echo "## $bench: $args"; echo; python3 scripts/ab_compare.py /tmp/ab-$bench-{old1,new1,old2,new2}.md; echo; } >>"$OUT/ab.md"
  done
  cat "$OUT/ab.md"
}

part_sweep() {
  local envs e i v n=0
  : >"$OUT/sweep.md"
  IFS=';' read -ra envs <<<"${SWEEP_ENVS:?set SWEEP_ENVS}"
  for e in "${envs[@]}"; do
    n=$((n + 1))
    for i in 1 2; do
      for v in base var; do
        env $([ $v = var ] && echo "$e") "$BIN/nibble" bench kernels ${SWEEP_KERNELS:-} --md "/tmp/sweep-$n-$v$i.md" \
          >>"$OUT/sweep.log" 2>&1 || { tail -5 "$OUT/sweep.log"; return 1; }
      done
    done
    { echo "## $e: ${SWEEP_KERNELS:-}"; echo; python3 scripts/ab_compare.py /tmp/sweep-$n-{base1,var1,base2,var2}.md; echo; } \
      >>"$OUT/sweep.md"
  done
  cat "$OUT/sweep.md"
}

part_steps() {
  local m batch=${STEPS_BATCH:-1}
  m=$(random_model "$(first_arch)") || return 1
  ncu --graph-profiling node --cache-control none --clock-control none --metrics gpu__time_duration.sum --csv \
    --launch-count "${STEPS_KERNELS:-2500}" "$BIN/nibble" bench e2e -m "$m" --formats "${STEPS_FORMAT:-nvfp4}" \
    --batches "$batch" --prompt 16 --steps 2 >/tmp/steps.csv 2>"$OUT/steps.log" || { tail -5 "$OUT/steps.log"; return 1; }
  python3 scripts/step_kernels.py /tmp/steps.csv "$batch" | tee "$OUT/steps.md"
}

# rough seconds a part needs: it is skipped when less than that is left
need() {
  case $1 in tests) echo 60 ;; chain) echo 20 ;; kernels) echo 120 ;; gemm) echo 120 ;; tune) echo 150 ;; e2e) echo 150 ;; ab) echo 200 ;;
    sweep) echo 120 ;; steps) echo 120 ;; esac
}
left() { echo $((${GPU_BUDGET_S:-540} - SECONDS)); }

case "${1:-}" in
  --stage) stage; exit 0 ;;
  --record) record "${2:?usage: scripts/gpu.sh --record RUN_DIR}"; exit 0 ;;
  --tune) set -- tests tune kernels ;;
esac
PARTS=("$@")
[ ${#PARTS[@]} -gt 0 ] || PARTS=(tests chain kernels gemm e2e)
for p in "${PARTS[@]}"; do
  [ -n "$(need "$p")" ] || { echo "gpu.sh: unknown part '$p' (tests chain kernels gemm tune e2e ab sweep steps)" >&2; exit 2; }
done
mkdir -p "$OUT"
nvidia-smi -L | tee "$OUT/device.txt"
setup_bin
status=0
for p in "${PARTS[@]}"; do
  if [ "$(left)" -lt "$(need "$p")" ]; then
    echo "== $p: skipped, $(left) s left of ${GPU_BUDGET_S:-540}" | tee -a "$OUT/parts.txt"
    continue
  fi
  start=$SECONDS
  "part_$p"
  rc=$?
  echo "== $p: rc $rc, $((SECONDS - start)) s" | tee -a "$OUT/parts.txt"
  [ "$rc" = 0 ] || status=1
done
exit $status
