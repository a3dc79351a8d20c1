#!/usr/bin/env python3
"""Decode speed local versus remote through two local shards (each half the layers),
interleaved in one run, medians over repetitions.

  bench/remote_decode_bench.py MODEL [--larql build/larql] [--reps 5] [--steps 32] [--threads 2]

Client and shards share the machine's cores; shards and client each use --threads, and
they never compute at the same time (the client waits for each layer's FFN)."""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from larql_procs import layer_count, rss_mb, start_shard, stop  # noqa: E402



def run(larql, model, steps, threads, extra):
    out = subprocess.run([larql, "run", model, "--prompt-ids", "1,2,3", "--steps", str(steps), "--ignore-eos", "--json",
                          "--threads", str(threads)] + extra, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--larql", default="build/larql")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()

    n = layer_count(a.model)
    half = n // 2
    shards = [start_shard(a.larql, a.model, f"0-{half - 1}", a.threads), start_shard(a.larql, a.model, f"{half}-{n - 1}", a.threads)]
    spec = f"0-{half - 1}={shards[0][1]},{half}-{n - 1}={shards[1][1]}"
    try:
        results = {k: [] for k in ("local", "f32", "f16", "i8")}
        layer_ms = {k: [] for k in results if k != "local"}
        ids = {}
        for rep in range(a.reps + 1):  # rep 0 warms the page cache and is dropped
            for kind in results:
                extra = [] if kind == "local" else ["--ffn", spec, "--wire", kind]
                d = run(a.larql, a.model, a.steps, a.threads, extra)
                ids.setdefault(kind, d["generated_ids"])
                if rep:
                    results[kind].append(d["tokens_per_second"])
                    if kind in layer_ms and d.get("remote_calls"):
                        layer_ms[kind].append(d["server_ms"] / d["remote_calls"])
                    print(f"rep {rep} {kind:5s} {d['tokens_per_second']:6.2f} tok/s", flush=True)
        # Resident memory: each half-shard after serving every one of its layers, a shard
        # serving the whole model after the same, and the client itself, local versus remote.
        whole = start_shard(a.larql, a.model, f"0-{n - 1}", a.threads)
        shards.append(whole)
        remote_client = run(a.larql, a.model, 4, a.threads, ["--ffn", whole[1]])
        local_client = run(a.larql, a.model, 4, a.threads, [])
        local = statistics.median(results["local"])
        print(f"\nmodel {a.model}: {n} layers, shards 0-{half - 1} and {half}-{n - 1}, {a.threads} threads each and in the client")
        print(f"{'':6s} {'tok/s (median)':>15s} {'x local':>8s}  ids equal to local")
        for kind, values in results.items():
            m = statistics.median(values)
            print(f"{kind:6s} {m:15.2f} {m / local:8.2f}  {ids[kind] == ids['local']}")
        print("\nFFN time per layer call on a shard (server-reported, median; the first call of each run is the prompt's):")
        for kind, values in layer_ms.items():
            print(f"  {kind:6s} {statistics.median(values):8.2f} ms")
        print("\nresident memory after serving every owned layer (VmRSS):")
        rss = []
        for (proc, url), name in zip(shards, [f"shard 0-{half - 1}", f"shard {half}-{n - 1}", f"shard 0-{n - 1} (whole)"]):
            rss.append(rss_mb(proc.pid))
            print(f"  {name:22s} {rss[-1]:8.0f} MB")
        print(f"  per owned layer ((whole - first half) / {n - half}): {(rss[2] - rss[0]) / (n - half):.0f} MB")
        print(f"client peak RSS: local {local_client['max_rss_bytes'] / 2**20:.0f} MB, "
              f"remote {remote_client['max_rss_bytes'] / 2**20:.0f} MB (no FFN weights read)")
    finally:
        stop(shards)


if __name__ == "__main__":
    main()
