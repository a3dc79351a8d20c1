#!/usr/bin/env python3
"""One shard layer of H=4096 / FFN=14336 (the 7B–8B width): a 64-row request against 64
single-row requests, in one run, per arithmetic (issue 17's target: the batch at least 4×
faster per row). The shard's own compute time (latency_ms of each answer) is compared, and
the wall time of the calls next to it (JSON bodies, loopback).

  bench/shard_batch_bench.py [--rows 64] [--reps 3] [--arithmetic f32,bf16-dot]

The model (one layer, bf16, random weights, ~0.4 GB) is written to build/models once."""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from larql_procs import start, stop  # noqa: E402

MODEL = "build/models/synth-h4096-ffn14336-1l"


def post(url, rows, hidden, rng):
    body = json.dumps({"layers": [0], "seq_len": rows, "full_output": True,
                       "residual": [rng.uniform(-1, 1) for _ in range(rows * hidden)]}).encode()
    req = urllib.request.Request(url + "/v1/walk-ffn", data=body, headers={"Content-Type": "application/json"})
    begin = time.monotonic()
    with urllib.request.urlopen(req, timeout=600) as r:
        answer = json.loads(r.read())
    return answer["latency_ms"], (time.monotonic() - begin) * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--larql", default="build/larql")
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--arithmetic", default="f32,bf16-dot")
    a = ap.parse_args()
    if not os.path.exists(MODEL):
        subprocess.run([a.larql, "synth", "--out", MODEL, "--hidden", "4096", "--layers", "1", "--ffn", "14336", "--heads", "32",
                        "--kv-heads", "8", "--vocab", "256", "--dtype", "bf16", "--seed", "3"], check=True, stdout=subprocess.DEVNULL)
    hidden, rng = 4096, random.Random(7)
    print(f"one layer, H=4096, FFN=14336, bf16 weights, {a.threads} threads; medians of {a.reps} repetitions; "
          f"compute = the shard's latency_ms, wall = the HTTP calls (JSON)")
    print(f"{'arithmetic':>10s} {'1 row ms':>9s} {f'{a.rows} rows ms':>10s} {'per row x':>10s} {'wall 1x' + str(a.rows):>10s} "
          f"{'wall batch':>10s} {'wall x':>7s}")
    for arithmetic in a.arithmetic.split(","):
        shard = start([a.larql, "serve", MODEL, "--port", "0", "--threads", str(a.threads), "--arithmetic", arithmetic], "shard")
        try:
            post(shard[1], 1, hidden, rng)  # warm: the weights and the threads
            single, batch, single_wall, batch_wall = [], [], [], []
            for _ in range(a.reps):
                calls = [post(shard[1], 1, hidden, rng) for _ in range(a.rows)]
                single.append(sum(c[0] for c in calls))
                single_wall.append(sum(c[1] for c in calls))
                ms, wall = post(shard[1], a.rows, hidden, rng)
                batch.append(ms)
                batch_wall.append(wall)
            s, b = statistics.median(single), statistics.median(batch)
            sw, bw = statistics.median(single_wall), statistics.median(batch_wall)
            print(f"{arithmetic:>10s} {s / a.rows:9.2f} {b:10.1f} {s / b:10.2f} {sw:10.1f} {bw:10.1f} {sw / bw:7.2f}", flush=True)
        finally:
            stop([shard])


if __name__ == "__main__":
    main()
