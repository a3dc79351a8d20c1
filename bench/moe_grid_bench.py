#!/usr/bin/env python3
"""Decode of a mixture-of-experts model with its experts split over two shards, against the
same model local, in one run (PROTOCOL §12).

  bench/moe_grid_bench.py MODEL [--larql build/larql] [--proxy build/bench/link_proxy]
      [--experts 128] [--steps 32] [--reps 3] [--wire f32,f16,q8] [--links 1Gbit/2ms,1Gbit/20ms]

Local runs first and ends before any shard starts (the machine holds one copy of the
weights in use at a time); every process runs with --no-huge-pages so that they share the
file's page cache. Then two shards each own half the experts of every layer (1 thread each:
they compute at the same time, one core each); the client (2 threads) keeps attention and
the router. Reported: tokens/s, the grid's ratio to local, bytes per token each way, the cost
of --expert-rows against weighted sums, shard RSS; then, for each link, decode through a
bench/link_proxy per shard next to what `larql bench` projects for that link."""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from larql_procs import rss_mb, start, start_proxies, stop  # noqa: E402



def run(larql, model, steps, extra):
    out = subprocess.run([larql, "run", model, "--prompt-ids", "1,2,3", "--steps", str(steps), "--ignore-eos", "--json",
                          "--threads", "2", "--no-huge-pages"] + extra, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def median_run(larql, model, steps, reps, extra):
    runs = [run(larql, model, steps, extra) for _ in range(reps + 1)][1:]  # the first warms the page cache
    best = statistics.median(r["tokens_per_second"] for r in runs)
    return best, runs[-1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--larql", default="build/larql")
    ap.add_argument("--proxy", default="build/bench/link_proxy")
    ap.add_argument("--experts", type=int, default=128)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--wire", default="f32,f16,q8")
    ap.add_argument("--links", default="1Gbit/2ms,1Gbit/20ms")
    a = ap.parse_args()
    half = a.experts // 2

    local, local_doc = median_run(a.larql, a.model, a.steps, a.reps, [])
    print(f"model {a.model}: {a.steps} decode steps after a 3-token prompt, median of {a.reps}; "
          f"local {local:.2f} tok/s (2 threads), RSS {local_doc['max_rss_bytes'] / 2**20:.0f} MiB", flush=True)

    shards = [start([a.larql, "serve", a.model, "--port", "0", "--experts", r, "--threads", "1", "--no-huge-pages"], f"shard {r}")
              for r in (f"0-{half - 1}", f"{half}-{a.experts - 1}")]
    try:
        spec = f"0-999/0-{half - 1}={shards[0][1]},0-999/{half}-{a.experts - 1}={shards[1][1]}"
        print(f"two expert shards (experts 0-{half - 1} and {half}-{a.experts - 1}, 1 thread each), loopback:")
        print(f"{'wire':>16s} {'tok/s':>7s} {'/local':>6s} {'sent B/tok':>10s} {'recv B/tok':>10s} {'same ids':>8s}")
        for wire in a.wire.split(","):
            for rows in (False, True):
                if rows and wire != "f32":
                    continue
                extra = ["--ffn", spec, "--wire", wire] + (["--expert-rows"] if rows else [])
                tps, doc = median_run(a.larql, a.model, a.steps, a.reps, extra)
                tokens = len(doc["generated_ids"]) + 3
                name = wire + (" expert-rows" if rows else " sums")
                print(f"{name:>16s} {tps:7.2f} {tps / local:6.2f} {doc['bytes_sent'] / tokens:10.0f} "
                      f"{doc['bytes_received'] / tokens:10.0f} {str(doc['generated_ids'] == local_doc['generated_ids']):>8s}",
                      flush=True)
        print("shard RSS after the runs: " + ", ".join(f"{rss_mb(p.pid):.0f} MiB" for p, _ in shards))

        out = subprocess.run([a.larql, "bench", a.model, "--prompt-ids", "1,2,3", "--steps", str(a.steps), "--ffn", spec,
                              "--wire", "f16", "--links", a.links, "--json", "--threads", "2"],
                             check=True, capture_output=True, text=True).stdout
        projected = json.loads(out)["formats"][0]["projected_tokens_per_second"]
        for link in a.links.split(","):
            proxies = start_proxies(a.proxy, [url for _, url in shards], link)
            try:
                via = f"0-999/0-{half - 1}={proxies[0][1]},0-999/{half}-{a.experts - 1}={proxies[1][1]}"
                steps = max(4, a.steps // 4) if float(link.split("/")[1][:-2]) >= 10 else a.steps
                doc = run(a.larql, a.model, steps, ["--ffn", via, "--wire", "f16"])
                print(f"f16 sums over {link} (link_proxy per shard, {steps} steps): {doc['tokens_per_second']:.2f} tok/s; "
                      f"larql bench projects {projected[link.replace('/', '_')]:.2f}", flush=True)
            finally:
                stop(proxies)
    finally:
        stop(shards)


if __name__ == "__main__":
    main()
