#!/usr/bin/env bash
# The main demo: builds nibble, then on the house model (../shared/data/models/house-49m)
# quantizes to NVFP4-RaZeR, checks its perplexity against FP32 / NVFP4, and generates text.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
DATA=${NIBBLE_DATA:-../shared/data}
MODEL=$DATA/models/house-49m
OUT=${DEMO_OUT:-/tmp/nibble-demo}
N=build/nibble
set -x
$N formats error --dist gaussian --formats nvfp4-razer,nvfp4-4over6,nvfp4,mxfp4,razer-fp4-g128,int4-g128,nf4
$N quantize -m "$MODEL" -f nvfp4-razer -o "$OUT/house-49m-nvfp4-razer"
for f in "" "-f nvfp4"; do
  $N ppl -m "$MODEL" $f --text "$DATA/text/house-val/house-val.txt" --max-windows 4
done
$N ppl -m "$OUT/house-49m-nvfp4-razer" --text "$DATA/text/house-val/house-val.txt" --max-windows 4
$N generate -m "$OUT/house-49m-nvfp4-razer" -p "The old house on the hill" -n 48 --seed 1
