#!/usr/bin/env python3
"""What a shard's coalescing buys several independent clients: N concurrent `larql run
--ffn` processes (each its own prompt, greedy, --steps tokens) against one shard serving
every layer, N = 1, 2, 4; aggregate tok/s (all generated tokens over the wall time) and
the share of layer computations that ran inside another client's matmul.

  bench/coalesce_bench.py MODEL [--larql build/larql] [--clients 1,2,4] [--steps 32] [--threads 2]"""
import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from larql_procs import metric, start, stop  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--larql", default="build/larql")
    ap.add_argument("--clients", default="1,2,4")
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--wire", default="f16")
    a = ap.parse_args()
    shard = start([a.larql, "serve", a.model, "--port", "0", "--threads", str(a.threads)], "shard")
    url = shard[1]
    try:
        run = lambda i: subprocess.Popen([a.larql, "run", a.model, "--ffn", url, "--wire", a.wire, "--prompt-ids",
                                          ",".join(str(1 + 13 * i + k) for k in range(8)), "--steps", str(a.steps),
                                          "--ignore-eos", "--json", "--threads", "1"],
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        run(0).wait()  # warm the page cache
        print(f"model {a.model}, one shard with every layer ({a.threads} threads), {a.wire} wire, {a.steps} tokens per client")
        print(f"{'clients':>7s} {'tok/s':>8s} {'x N=1':>6s} {'coalesced':>10s}")
        base = None
        for n in map(int, a.clients.split(",")):
            before_c, before_n = metric(url, "larql_shard_coalesced_total"), metric(url, "larql_shard_requests_total")
            begin = time.monotonic()
            procs = [run(i) for i in range(n)]
            tokens = sum(len(json.loads(p.communicate(timeout=900)[0])["generated_ids"]) for p in procs)
            wall = time.monotonic() - begin
            tps = tokens / wall
            base = base or tps
            share = (metric(url, "larql_shard_coalesced_total") - before_c) / max(1.0, metric(url, "larql_shard_requests_total") - before_n)
            print(f"{n:7d} {tps:8.2f} {tps / base:6.2f} {100 * share:9.0f}%", flush=True)
    finally:
        stop([shard])


if __name__ == "__main__":
    sys.exit(main())
