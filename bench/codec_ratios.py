#!/usr/bin/env python3
"""Prints each codec benchmark's throughput as a multiple of memcpy of the same shape,
from one run of codec_bench (--benchmark_format=json on stdin)."""
import json
import sys

TARGETS = {"EncodeF16": 1.0, "DecodeF16": 1.0, "EncodeI8": 0.5, "DecodeI8": 0.8, "EncodeQ8": 0.5, "DecodeQ8": 0.8}

runs = json.load(sys.stdin)["benchmarks"]
rate = {r["name"]: r["bytes_per_second"] for r in runs if r.get("run_type", "iteration") == "iteration"}
shapes = sorted({n.split("/", 1)[1] for n in rate if n.startswith("BM_Memcpy/")},
                key=lambda s: tuple(int(x) for x in s.split("/")))
kinds = ["EncodeF16", "DecodeF16", "EncodeQ8", "DecodeQ8", "EncodeI8", "DecodeI8", "EncodeF32", "DecodeF32"]
print(f"{'H/S':>10} {'memcpy GiB/s':>12} " + " ".join(f"{k:>10}" for k in kinds))
for shape in shapes:
    base = rate[f"BM_Memcpy/{shape}"]
    cells = []
    for k in kinds:
        r = rate.get(f"BM_{k}/{shape}")
        cells.append(f"{r / base:>9.2f}x" if r else f"{'-':>10}")
    print(f"{shape:>10} {base / 2**30:>12.1f} " + " ".join(cells))
print("targets at S=256 (× memcpy): " + ", ".join(f"{k} ≥ {v}" for k, v in TARGETS.items()))
failed = [f"{k}/{s}" for k, v in TARGETS.items() for s in shapes
          if s.endswith("/256") and rate[f"BM_{k}/{s}"] / rate[f"BM_Memcpy/{s}"] < v]
print("all targets met" if not failed else "below target: " + ", ".join(failed))
