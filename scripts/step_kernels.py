#!/usr/bin/env python3
"""Where one decode step's GPU time goes, from an `ncu --csv` run of `nibble bench e2e` that
measured gpu__time_duration.sum for every kernel (scripts/gpu.sh steps).

  scripts/step_kernels.py NCU.csv [BATCH]

A step starts at the embedding kernel; the last complete step whose embedding grid has BATCH
(default 1) blocks is shown: per kernel (name and grid), calls, us per call and us per step.
"""
import collections
import csv
import re
import sys


def kernels(path):
    lines = [line for line in open(path) if line.startswith('"')]
    out = []
    for r in csv.DictReader(lines):
        if r.get("Metric Name") == "gpu__time_duration.sum":
            us = float(r["Metric Value"].replace(",", "")) / 1e3  # ns
            name = re.sub(r"\(.*", "", r["Kernel Name"]).replace("nibble::cuda::", "").strip()
            out.append((name, r.get("Grid Size", ""), us))
    return out


def main(path, batch):
    ks = kernels(path)
    starts = [i for i, (n, g, _) in enumerate(ks) if "embed_kernel" in n]
    steps = [(a, b) for a, b in zip(starts, starts[1:]) if ks[a][1].startswith(f"({batch}, ")]
    if not steps:
        sys.exit(f"no complete step of batch {batch} among {len(ks)} kernels")
    a, b = steps[-1]
    per = collections.defaultdict(lambda: [0, 0.0])
    for name, grid, us in ks[a:b]:
        per[(name, grid)][0] += 1
        per[(name, grid)][1] += us
    total = sum(us for _, _, us in ks[a:b])
    print(f"{b - a} kernels, {total:.1f} us summed (each kernel alone: ramp and tail counted in full)\n")
    print("| kernel | grid | calls | us per call | us per step |")
    print("|---|---|---|---|---|")
    for (name, grid), (calls, us) in sorted(per.items(), key=lambda kv: -kv[1][1]):
        print(f"| {name[:90]} | {grid} | {calls} | {us / calls:.2f} | {us:.1f} |")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) == 3 else 1)
