#!/usr/bin/env python3
"""Decode over network links, next to what `larql bench` projects for them.

  bench/link_decode.py MODEL [MODEL...] [--larql build/larql] [--proxy build/bench/link_proxy]
      [--steps 32] [--links 1Gbit/0.2ms,100Mbit/0.2ms,...] [--wire f32,f16,q8,i8] [--threads 2]
      [--drafts lookup,models/demo-draft]

Two shards (each half the layers) on loopback, each behind its own bench/link_proxy that
adds the link's round trip and limits each direction to its rate (this machine's kernel has
no tc netem). For each model: `larql bench` straight to the shards gives the projection
for every link; then, for each link and wire format, `larql run --ffn` through the proxies
measures decode tokens/s. The proxies' own round trip is checked first against the RTT
they were given. With --drafts, each link also gets speculative rows: the first wire format
with each --draft (prompt lookup, a draft model), its tokens/s, the ratio to plain decoding
measured just before, and tokens per pass (a pass costs one round trip per layer)."""
import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from larql_procs import kill, layer_count, start_proxies, start_shard, stop  # noqa: E402

DEFAULT_LINKS = ",".join(f"{rate}/{rtt}ms" for rtt in ("0.2", "2", "20") for rate in ("1Gbit", "100Mbit", "10Mbit"))



def health_rtt_ms(url, n=20):
    """Median wall time of GET /v1/health on one kept-alive connection."""
    host, port = url.removeprefix("http://").split(":")
    c = http.client.HTTPConnection(host, int(port), timeout=30)
    times = []
    for _ in range(n):
        t = time.perf_counter()
        c.request("GET", "/v1/health")
        c.getresponse().read()
        times.append((time.perf_counter() - t) * 1000)
    c.close()
    return statistics.median(times)


def run(larql, model, spec, wire, steps, threads, extra=()):
    out = subprocess.run([larql, "run", model, "--prompt-ids", "1,2,3", "--steps", str(steps), "--ignore-eos", "--json",
                          "--threads", str(threads), "--ffn", spec, "--wire", wire, *extra],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def measure(larql, model, spec, wire, steps, threads):
    return run(larql, model, spec, wire, steps, threads)["tokens_per_second"]


def project(larql, model, spec, wires, links, steps, threads):
    out = subprocess.run([larql, "bench", model, "--prompt-ids", "1,2,3", "--steps", str(steps), "--ffn", spec, "--wire", wires,
                          "--links", links, "--json", "--threads", str(threads)],
                         check=True, capture_output=True, text=True).stdout
    return {f["wire"]: f for f in json.loads(out)["formats"]}


def effective_rtts(proxy, shards, links):
    """The round trip each emulated RTT really adds: health RTT through a proxy of that RTT
    and unlimited rate, less the health RTT straight to the shard."""
    direct = health_rtt_ms(shards[0][1], 50)
    out = {}
    for rtt in sorted({link.split("/")[1] for link in links}, key=lambda r: float(r[:-2])):
        procs = start_proxies(proxy, [shards[0][1]], f"1000Gbit/{rtt}")
        out[rtt] = max(0.0, health_rtt_ms(procs[0][1], 50) - direct)
        stop(procs)
    return direct, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--larql", default="build/larql")
    ap.add_argument("--proxy", default="build/bench/link_proxy")
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--links", default=DEFAULT_LINKS)
    ap.add_argument("--wire", default="f32,f16,q8,i8")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--drafts", default="", help="--draft values for speculative rows, each with its --draft-max and "
                    "--draft-branches if any (e.g. 'lookup,lookup --draft-max 16 --draft-branches 4,models/demo-draft')")
    a = ap.parse_args()
    drafts = [d.split() for d in a.drafts.split(",") if d.strip()]
    links = a.links.split(",")
    shards, proxies = [], []
    try:
        for model in a.models:
            n = layer_count(model)
            half = n // 2
            shards = [start_shard(a.larql, model, f"0-{half - 1}", a.threads), start_shard(a.larql, model, f"{half}-{n - 1}", a.threads)]
            direct = f"0-{half - 1}={shards[0][1]},{half}-{n - 1}={shards[1][1]}"
            direct_rtt, eff = effective_rtts(a.proxy, shards, links)
            effective = {link: f"{link.split('/')[0]}/{eff[link.split('/')[1]]:.3f}ms" for link in links}
            projected = project(a.larql, model, direct, a.wire, ",".join(links + list(effective.values())), a.steps, a.threads)
            print(f"\nmodel {model}: {n} layers, two shards on loopback, each behind a link_proxy; "
                  f"{a.steps} decode steps, median of {a.reps}; client and shards {a.threads} threads")
            print(f"health round trip straight to a shard {direct_rtt:.3f} ms; what each emulated RTT really adds: " +
                  ", ".join(f"{k} -> {v:.3f} ms" for k, v in eff.items()))
            first = next(iter(projected.values()))
            print(f"larql bench (straight to the shards), per token: local {first['local_ms_per_token']:.2f} ms, "
                  f"round trips {first['round_trips_per_token']:.1f}")
            for wire, f in projected.items():
                print(f"  {wire}: server {f['server_ms_per_token']:.2f} ms, transport {f['transport_ms_per_token']:.2f} ms, "
                      f"bodies {f['bytes_sent_per_token'] + f['bytes_received_per_token']:.0f} B, "
                      f"HTTP heads {f['head_bytes_sent_per_token'] + f['head_bytes_received_per_token']:.0f} B")
            print("tokens/s: measured through the proxies; projected by larql bench for the nominal link and for the "
                  "link the proxy really emulated (its effective RTT); ratio = measured / projected(effective)")
            print(f"{'link':>14s} " + " ".join(f"{w + ' meas':>9s} {'nominal':>8s} {'eff':>8s} {'ratio':>5s}" for w in projected))
            for link in links:
                proxies = start_proxies(a.proxy, [url for _, url in shards], link)
                spec = f"0-{half - 1}={proxies[0][1]},{half}-{n - 1}={proxies[1][1]}"
                cells = []
                for wire, f in projected.items():
                    measured = statistics.median(measure(a.larql, model, spec, wire, a.steps, a.threads) for _ in range(a.reps))
                    nominal = f["projected_tokens_per_second"][link.replace("/", "_")]
                    real = f["projected_tokens_per_second"][effective[link].replace("/", "_")]
                    cells.append(f"{measured:9.2f} {nominal:8.2f} {real:8.2f} {measured / real:5.2f}")
                print(f"{link:>14s} " + " ".join(cells), flush=True)
                wire = next(iter(projected))
                for draft in drafts:
                    plain = statistics.median(measure(a.larql, model, spec, wire, a.steps, a.threads) for _ in range(a.reps))
                    runs = [run(a.larql, model, spec, wire, a.steps, a.threads, ("--draft", *draft)) for _ in range(a.reps)]
                    fast = statistics.median(r["tokens_per_second"] for r in runs)
                    print(f"{'':>14s}   {wire} --draft {' '.join(draft)}: {fast:.2f} tok/s, {fast / plain:.2f}x plain ({plain:.2f}), "
                          f"{runs[-1]['tokens_per_pass']:.2f} tokens per pass, {runs[-1]['accepted']} of {runs[-1]['drafted']} "
                          f"drafts kept", flush=True)
                stop(proxies)
                proxies = []
            stop(shards)
            shards = []
    finally:
        kill(shards + proxies)


if __name__ == "__main__":
    main()
