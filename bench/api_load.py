#!/usr/bin/env python3
"""Continuous batching under load: N concurrent streaming clients against `larql api`
(N = 1, 2, 4, 8, 16 by default), locally or with the FFN on two shards behind a router.
Each client streams one greedy completion of --tokens tokens from its own prompt (token
ids); reported per N: aggregate generated tok/s (all tokens over the wall time of the
round, prompts' prefill included), the decode rate once every client has its first token
(tokens after that moment over the time to the last one: what llama-batched-bench calls
S_TG), time to first token (median and worst client), gaps between a client's tokens
(p50, p99). The list of client counts is run --rounds times, interleaved, and each
figure is the median over rounds (this machine's speed moves from minute to minute; the
ratios to N=1 are then taken within one run). Loopback only; every round is bounded by a
timeout.

  bench/api_load.py MODEL [--grid [--sessions] [--link 100Mbit/20ms]] [--wire f16] [--clients 1,2,4,8,16] [--tokens 32] [--prompt-tokens 9] [--parallel 16]
                      [--arithmetic f32|bf16-dot] [--rounds 3]"""
import argparse
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from larql_procs import layer_count, start, start_proxies, stop, stream_completion  # noqa: E402


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


def run_round(url, n, tokens, prompt_tokens):
    """N concurrent clients once: aggregate tok/s, time to first token, gaps between tokens."""
    results, threads = [], []
    begin = time.monotonic()
    for i in range(n):
        prompt = [1] + [100 + 17 * i + k for k in range(prompt_tokens - 1)]
        threads.append(threading.Thread(target=client, args=(url, prompt, tokens, results)))
        threads[-1].start()
    for t in threads:
        t.join(timeout=900)
    wall = time.monotonic() - begin
    ttft = [r["arrivals"][0] - r["start"] for r in results if r["arrivals"]]
    gaps = [b - a_ for r in results for a_, b in zip(r["arrivals"], r["arrivals"][1:])]
    # All decoding: from the last client's first token to the last token of any.
    all_in = max(r["arrivals"][0] for r in results if r["arrivals"])
    last = max(r["arrivals"][-1] for r in results if r["arrivals"])
    decoded = sum(1 for r in results for t in r["arrivals"] if t > all_in)
    decode_tps = decoded / (last - all_in) if last > all_in else 0.0
    return {"tps": sum(r["tokens"] for r in results) / wall, "decode_tps": decode_tps, "ttft_p50": statistics.median(ttft), "ttft_max": max(ttft),
            "gap_p50": percentile(gaps, 50), "gap_p99": percentile(gaps, 99)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--larql", default="build/larql")
    ap.add_argument("--grid", action="store_true", help="FFN on two shards (half the layers each) behind a router")
    ap.add_argument("--sessions", action="store_true",
                    help="with --grid: session shards (serve --sessions), the API's layers on them through the router (--remote-layers)")
    ap.add_argument("--link", help="with --grid: a build/bench/link_proxy emulating this link between the API and the router")
    ap.add_argument("--proxy", default="build/bench/link_proxy")
    ap.add_argument("--wire", default="f16")
    ap.add_argument("--clients", default="1,2,4,8,16")
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--prompt-tokens", type=int, default=9, help="each client's prompt length (distinct ids per client)")
    ap.add_argument("--parallel", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--arithmetic", default="f32", help="f32 or bf16-dot, for the FFN wherever it runs")
    ap.add_argument("--rounds", type=int, default=3, help="the clients list is run this many times, interleaved; medians reported")
    a = ap.parse_args()
    procs = []
    try:
        args = ["api", a.model, "--port", "0", "--parallel", str(a.parallel), "--threads", str(a.threads), "--arithmetic", a.arithmetic]
        if a.grid:
            n = layer_count(a.model)
            half = n // 2
            for layers in (f"0-{half - 1}", f"{half}-{n - 1}"):
                procs.append(start([a.larql, "serve", a.model, "--port", "0", "--layers", layers, "--threads", str(a.threads),
                                     "--arithmetic", a.arithmetic, *(["--sessions"] if a.sessions else [])], "shard " + layers))
            shards = f"0-{half - 1}={procs[0][1]},{half}-{n - 1}={procs[1][1]}"
            procs.append(start([a.larql, "router", "--port", "0", "--shards", shards], "router"))
            if a.link:
                procs += start_proxies(a.proxy, [procs[-1][1]], a.link)
            args += ["--remote-layers" if a.sessions else "--ffn", procs[-1][1], "--wire", a.wire]
        procs.append(start([a.larql] + args, "larql api", health=None))
        url = procs[-1][1]
        client(url, [1, 2, 3], 4, [])  # warm the page cache
        grid = f"grid (two {'session ' if a.sessions else ''}shards + router, {a.wire} wire{', link ' + a.link if a.link else ''})"
        print(f"model {a.model}, {grid if a.grid else 'local'}, "
              f"{a.prompt_tokens}-token prompts, {a.tokens} tokens per client, --parallel {a.parallel}, {a.threads} threads, {a.arithmetic} arithmetic, medians of {a.rounds} rounds")
        print(f"{'clients':>7s} {'tok/s':>8s} {'x N=1':>6s} {'decode':>8s} {'x N=1':>6s} {'ttft p50':>9s} {'ttft max':>9s} {'gap p50':>8s} {'gap p99':>8s}")
        counts = list(map(int, a.clients.split(",")))
        rounds = {n: [] for n in counts}  # per N, one result per round
        for r in range(a.rounds):
            for n in counts:
                rounds[n].append(run_round(url, n, a.tokens, a.prompt_tokens))
        base = statistics.median(x["tps"] for x in rounds[counts[0]])
        decode_base = statistics.median(x["decode_tps"] for x in rounds[counts[0]])
        for n in counts:
            med = lambda key: statistics.median(x[key] for x in rounds[n])  # noqa: E731
            print(f"{n:7d} {med('tps'):8.2f} {med('tps') / base:6.2f} {med('decode_tps'):8.2f} {med('decode_tps') / decode_base:6.2f} {med('ttft_p50') * 1000:7.0f}ms {med('ttft_max') * 1000:7.0f}ms "
                  f"{med('gap_p50') * 1000:6.0f}ms {med('gap_p99') * 1000:6.0f}ms", flush=True)
    finally:
        stop(list(reversed(procs)))


if __name__ == "__main__":
    main()
