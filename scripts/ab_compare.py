#!/usr/bin/env python3
"""Joins Markdown tables of `nibble bench kernels` / `gemm` / `e2e` from alternating runs of two
builds and prints one Markdown table: each row's times per run and the new/old speed ratio.

  scripts/ab_compare.py OLD1.md NEW1.md [OLD2.md NEW2.md ...]
"""
import statistics
import sys

KEYS = ("model", "format", "path", "KV cache", "variant", "proj", "K", "N", "M", "batch")
DEFAULTS = {"KV cache": "fp16"}  # e2e tables from before the column: an FP16 cache


def rows(path):
    out, header = {}, None
    for line in open(path):
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None or cells[0] == header[0]:
            header = cells
            continue
        if set(cells[0]) <= set("-: "):
            continue
        d = dict(zip(header, cells))
        value = "us" if "us" in d else "decode tok/s"
        if value not in d:
            continue
        out[tuple(d.get(k, DEFAULTS.get(k, "")) for k in KEYS)] = (value, float(d[value]))
    return out


def main(paths):
    if len(paths) < 2 or len(paths) % 2:
        sys.exit("usage: ab_compare.py OLD1.md NEW1.md [OLD2.md NEW2.md ...]")
    old = [rows(p) for p in paths[0::2]]
    new = [rows(p) for p in paths[1::2]]
    print("| row | old | new | new speed / old |")
    print("|---|---|---|---|")
    for key, (unit, _) in old[0].items():
        o = [r[key][1] for r in old if key in r]
        n = [r[key][1] for r in new if key in r]
        if not n:
            continue
        om, nm = statistics.median(o), statistics.median(n)
        ratio = om / nm if unit == "us" else nm / om
        name = " ".join(k for k in key if k)
        print(f"| {name} ({unit}) | {' / '.join(f'{v:g}' for v in o)} | {' / '.join(f'{v:g}' for v in n)} | {ratio:.3f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
