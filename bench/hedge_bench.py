#!/usr/bin/env python3
"""Tail latency through a router whose replicas have slow tails, with and without hedging,
in one run.

  bench/hedge_bench.py [MODEL] [--larql build/larql] [--proxy build/bench/link_proxy]
      [--clients 4] [--seconds 15] [--stall-every 10] [--stall-ms 100]

Two shards of MODEL (default models/demo), each behind a link_proxy that holds every Nth
request --stall-ms longer (a replica that is always slow is simply avoided: the router
prefers the replica with the lower recent latency, so hedging is for tails that can hit
whichever replica is first). For each router setting (no hedging, a fixed delay, auto)
a fresh router over the same replicas gets `larql loadtest` (single-row, single-layer
f16 calls), and p50/p99/max are printed with the router's hedge counters. Then the client
hedges itself: `larql run --ffn "RANGE=P1|P2" --hedge-after-ms H` decodes --steps tokens
through the same proxies (no router), and the gaps between its tokens are printed."""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from larql_procs import layer_count, metric, start, stop  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?", default="models/demo")
    ap.add_argument("--larql", default="build/larql")
    ap.add_argument("--proxy", default="build/bench/link_proxy")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--stall-every", type=int, default=10)
    ap.add_argument("--stall-ms", type=float, default=100)
    ap.add_argument("--hedges", default="0,10,auto")
    ap.add_argument("--client-hedges", default="0,10")
    ap.add_argument("--steps", type=int, default=150, help="tokens each client run decodes")
    a = ap.parse_args()
    procs = []
    try:
        shard = lambda: start([a.larql, "serve", a.model, "--port", "0", "--threads", "1"], "shard")
        procs += [shard(), shard()]
        for shard_url in (procs[0][1], procs[1][1]):
            procs.append(start([a.proxy, "--to", shard_url.removeprefix("http://"), "--stall-every", str(a.stall_every),
                                "--stall-ms", str(a.stall_ms)], "link_proxy", health=None))
        shards = f"0-{layer_count(a.model) - 1}={procs[2][1]}|{procs[3][1]}"
        print(f"model {a.model}; two replicas, each behind a proxy holding every {a.stall_every}th request "
              f"{a.stall_ms:.0f} ms longer; {a.clients} clients × {a.seconds:.0f} s of single-row f16 calls per setting")
        print(f"{'--hedge-after-ms':>16s} {'requests':>9s} {'p50 ms':>8s} {'p99 ms':>8s} {'max ms':>8s} {'hedges':>7s} {'won':>5s}")
        for hedge in a.hedges.split(","):
            router = start([a.larql, "router", "--port", "0", "--shards", shards, "--hedge-after-ms", hedge], "router")
            out = subprocess.run([a.larql, "loadtest", router[1], "--clients", str(a.clients), "--seconds", str(a.seconds),
                                  "--rows", "1", "--mix", "f16", "--json"], capture_output=True, text=True).stdout
            load = json.loads(out)["load"]
            lat = load["latency_ms"]
            print(f"{hedge:>16s} {load['requests']:9d} {lat['p50']:8.2f} {lat['p99']:8.2f} {lat['max']:8.2f} "
                  f"{metric(router[1], 'larql_router_hedges_total'):7.0f} {metric(router[1], 'larql_router_hedge_wins_total'):5.0f}",
                  flush=True)
            stop([router])
        print(f"\nlarql run --ffn through the same two proxies, {a.steps} tokens per setting")
        print(f"{'--hedge-after-ms':>16s} {'tok/s':>8s} {'gap p50':>8s} {'gap p99':>8s} {'gap max':>8s} {'hedges':>7s} {'won':>5s}")
        for hedge in a.client_hedges.split(","):
            out = subprocess.run([a.larql, "run", a.model, "--ffn", shards, "--wire", "f16", "--prompt-ids", "1,300,301",
                                  "--steps", str(a.steps), "--ignore-eos", "--json", "--hedge-after-ms", hedge],
                                 capture_output=True, text=True, timeout=600).stdout
            run = json.loads(out)
            gap = run["token_ms"]
            print(f"{hedge:>16s} {run['tokens_per_second']:8.1f} {gap['p50']:8.2f} {gap['p99']:8.2f} {gap['max']:8.2f} "
                  f"{run['hedges']:7d} {run['hedge_wins']:5d}", flush=True)
    finally:
        stop(procs)


if __name__ == "__main__":
    main()
