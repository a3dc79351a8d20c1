#!/usr/bin/env python3
"""Continuous batching under load: N concurrent streaming clients against `larql api`
(N = 1, 2, 4, 8, 16 by default), locally or with the FFN on two shards behind a router.
Each client streams one greedy completion of --tokens tokens from its own prompt (token
ids); reported per N: aggregate generated tok/s (all tokens over the wall time of the
round), time to first token (median and worst client), gaps between a client's tokens
(p50, p99). Loopback only; every round is bounded by a timeout.

  bench/api_load.py MODEL [--grid] [--wire f16] [--clients 1,2,4,8,16] [--tokens 32] [--parallel 16]
                      [--arithmetic f32|bf16-dot]"""
import argparse
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from larql_procs import layer_count, start, stop, stream_completion  # noqa: E402


def client(url, prompt, tokens, out):
    start = time.monotonic()
    arrivals, count = [], 0
    for now, chunk in stream_completion(url, prompt, tokens, timeout=900):
        if chunk.get("usage"):
            count = chunk["usage"]["completion_tokens"]
        elif chunk["choices"] and chunk["choices"][0]["text"]:
            arrivals.append(now)
    out.append({"start": start, "arrivals": arrivals, "tokens": count})


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))] if values else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--larql", default="build/larql")
    ap.add_argument("--grid", action="store_true", help="FFN on two shards (half the layers each) behind a router")
    ap.add_argument("--wire", default="f16")
    ap.add_argument("--clients", default="1,2,4,8,16")
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--parallel", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--arithmetic", default="f32", help="f32 or bf16-dot, for the FFN wherever it runs")
    a = ap.parse_args()
    procs = []
    try:
        args = ["api", a.model, "--port", "0", "--parallel", str(a.parallel), "--threads", str(a.threads), "--arithmetic", a.arithmetic]
        if a.grid:
            n = layer_count(a.model)
            half = n // 2
            for layers in (f"0-{half - 1}", f"{half}-{n - 1}"):
                procs.append(start([a.larql, "serve", a.model, "--port", "0", "--layers", layers, "--threads", str(a.threads),
                                     "--arithmetic", a.arithmetic], "shard " + layers))
            shards = f"0-{half - 1}={procs[0][1]},{half}-{n - 1}={procs[1][1]}"
            procs.append(start([a.larql, "router", "--port", "0", "--shards", shards], "router"))
            args += ["--ffn", procs[-1][1], "--wire", a.wire]
        procs.append(start([a.larql] + args, "larql api", health=None))
        url = procs[-1][1]
        client(url, [1, 2, 3], 4, [])  # warm the page cache
        print(f"model {a.model}, {'grid (two shards + router, ' + a.wire + ' wire)' if a.grid else 'local'}, "
              f"{a.tokens} tokens per client, --parallel {a.parallel}, {a.threads} threads, {a.arithmetic} arithmetic")
        print(f"{'clients':>7s} {'tok/s':>8s} {'x N=1':>6s} {'ttft p50':>9s} {'ttft max':>9s} {'gap p50':>8s} {'gap p99':>8s}")
        base = None
        for n in map(int, a.clients.split(",")):
            results, threads = [], []
            begin = time.monotonic()
            for i in range(n):
                prompt = [1] + [100 + 17 * i + k for k in range(8)]
                threads.append(threading.Thread(target=client, args=(url, prompt, a.tokens, results)))
                threads[-1].start()
            for t in threads:
                t.join(timeout=900)
            wall = time.monotonic() - begin
            total = sum(r["tokens"] for r in results)
            tps = total / wall
            base = base or tps
            ttft = [r["arrivals"][0] - r["start"] for r in results if r["arrivals"]]
            gaps = [b - a_ for r in results for a_, b in zip(r["arrivals"], r["arrivals"][1:])]
            print(f"{n:7d} {tps:8.2f} {tps / base:6.2f} {statistics.median(ttft) * 1000:7.0f}ms {max(ttft) * 1000:7.0f}ms "
                  f"{percentile(gaps, 50) * 1000:6.0f}ms {percentile(gaps, 99) * 1000:6.0f}ms", flush=True)
    finally:
        stop(list(reversed(procs)))


if __name__ == "__main__":
    main()
