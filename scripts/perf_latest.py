#!/usr/bin/env python3
"""Builds docs/perf/<bench>-latest.json: the newest measurement of every point.

    scripts/perf_latest.py BENCH OUT.json RUN.json [RUN.json ...]

Merges the runs' rows in the order given: a later run's row replaces an earlier row of the same
point (the key fields below), rows of points a later run did not measure are kept. Every row says
which file it came from ("run": the file name without .json; a row that already names its run
keeps it, so OUT.json itself may be the first input). A run that measured only a few formats thus
no longer hides the rest of the table.
"""
import json
import os
import sys

KEYS = {
    "gemm": ("format", "path", "model", "proj", "K", "N", "M"),
    "kernels": ("format", "variant", "launch", "model", "proj", "K", "N", "M"),
    "e2e": ("model", "format", "kv_cache", "batch", "prompt", "lm_head_quantized"),
}
# runs before the KV-cache option had an FP16 cache; before 2026-11-29 rows did not say whether the
# output layer was quantized (it was not, except in docs/perf/e2e-2026-11-22-lmhead, never merged)
DEFAULTS = {"kv_cache": "fp16", "lm_head_quantized": False}


def key(bench, row):
    return tuple(row.get(k, DEFAULTS.get(k)) for k in KEYS[bench])


def main(argv):
    if len(argv) < 4 or argv[1] not in KEYS:
        sys.exit(f"usage: {argv[0]} {{{'|'.join(KEYS)}}} OUT.json RUN.json [RUN.json ...]")
    bench, out, runs = argv[1], argv[2], argv[3:]
    merged = {}
    for path in runs:
        try:
            with open(path) as f:
                rows = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            sys.exit(f"perf_latest.py: {path}: {e}")
        if not isinstance(rows, list):
            sys.exit(f"perf_latest.py: {path}: not a list of rows")
        name = os.path.basename(path).removesuffix(".json")
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                sys.exit(f"perf_latest.py: {path}: row {i} is not an object")
            row.setdefault("run", name)
            k = key(bench, row)
            merged.pop(k, None)  # re-inserted last: the table keeps the newest run's order
            merged[k] = row
    with open(out, "w") as f:
        json.dump(list(merged.values()), f, indent=1)
        f.write("\n")
    print(f"{out}: {len(merged)} rows from {len(runs)} file(s)")


if __name__ == "__main__":
    main(sys.argv)
