#!/usr/bin/env python3
"""scripts/perf_latest.py: merging runs into <bench>-latest.json (newest row of each point wins)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "perf_latest.py")


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


class PerfLatest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, rows):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            json.dump(rows, f)
        return path

    def read(self, path):
        with open(path) as f:
            return json.load(f)

    def gemm(self, fmt, m, us):
        return {"format": fmt, "path": "fused", "model": "L", "proj": "o", "K": 64, "N": 8, "M": m, "us": us}

    def test_later_run_replaces_its_points_and_keeps_the_rest(self):
        old = self.write("gemm-a.json", [self.gemm("nvfp4", 256, 10.0), self.gemm("nf4", 256, 20.0)])
        new = self.write("gemm-b.json", [self.gemm("nvfp4", 256, 9.0), self.gemm("nvfp4", 512, 15.0)])
        out = os.path.join(self.dir.name, "latest.json")
        r = run("gemm", out, old, new)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = {(x["format"], x["M"]): x for x in self.read(out)}
        self.assertEqual(len(rows), 3)
        self.assertEqual(rows[("nvfp4", 256)]["us"], 9.0)
        self.assertEqual(rows[("nvfp4", 256)]["run"], "gemm-b")
        self.assertEqual(rows[("nf4", 256)]["run"], "gemm-a")
        # merging into itself keeps each row's run
        r = run("gemm", out, out, self.write("gemm-c.json", [self.gemm("nf4", 512, 30.0)]))
        self.assertEqual(r.returncode, 0, r.stderr)
        runs = sorted(x["run"] for x in self.read(out))
        self.assertEqual(runs, ["gemm-a", "gemm-b", "gemm-b", "gemm-c"])

    def test_e2e_rows_without_kv_cache_are_the_fp16_cache(self):
        base = {"model": "m", "format": "nvfp4", "batch": 1, "prompt": 512}
        old = self.write("e2e-a.json", [dict(base, tokens_per_s=1.0)])
        new = self.write("e2e-b.json", [dict(base, kv_cache="fp16", tokens_per_s=2.0),
                                        dict(base, kv_cache="fp8-e4m3", tokens_per_s=3.0)])
        out = os.path.join(self.dir.name, "latest.json")
        self.assertEqual(run("e2e", out, old, new).returncode, 0)
        self.assertEqual(sorted(x["tokens_per_s"] for x in self.read(out)), [2.0, 3.0])

    def test_e2e_quantized_output_layer_is_its_own_point(self):
        base = {"model": "m", "format": "int4-g128", "kv_cache": "fp16", "batch": 1, "prompt": 512}
        old = self.write("e2e-a.json", [dict(base, tokens_per_s=1.0)])  # before the field: unquantized
        new = self.write("e2e-b.json", [dict(base, lm_head_quantized=True, tokens_per_s=2.0)])
        newer = self.write("e2e-c.json", [dict(base, lm_head_quantized=False, tokens_per_s=3.0)])
        out = os.path.join(self.dir.name, "latest.json")
        self.assertEqual(run("e2e", out, old, new).returncode, 0)
        self.assertEqual(sorted(x["tokens_per_s"] for x in self.read(out)), [1.0, 2.0])
        self.assertEqual(run("e2e", out, out, newer).returncode, 0)
        self.assertEqual(sorted(x["tokens_per_s"] for x in self.read(out)), [2.0, 3.0])

    def test_bad_input_is_an_error_naming_the_file(self):
        bad = os.path.join(self.dir.name, "broken.json")
        with open(bad, "w") as f:
            f.write('[{"format": ')
        r = run("gemm", os.path.join(self.dir.name, "out.json"), bad)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("broken.json", r.stderr)
        r = run("nosuchbench", os.path.join(self.dir.name, "out.json"), bad)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("usage", r.stderr)
        r = run("gemm", os.path.join(self.dir.name, "out.json"), self.write("obj.json", {"a": 1}))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("not a list", r.stderr)
        r = run("gemm", os.path.join(self.dir.name, "out.json"), self.write("nums.json", [1, 2]))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("row 0 is not an object", r.stderr)


if __name__ == "__main__":
    unittest.main()
