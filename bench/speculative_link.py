#!/usr/bin/env python3
"""Speculative decoding over emulated links, against plain decoding through the same
proxies in the same run (issue 50).

  bench/speculative_link.py [MODEL] [--larql build/larql] [--proxy build/bench/link_proxy]
      [--links 100Mbit/20ms,100Mbit/2ms] [--prompts 5] [--steps 128] [--wire f16]
      [--drafts "lookup,lookup --draft-max 16 --draft-branches 4,models/demo-draft"]

Two shards (half the layers each) on loopback, each behind a bench/link_proxy. Prompts: the
first words of held-out KJV verses (tests/data/kjv-heldout.txt, chapters the demo model
was not trained on). For each link: greedy decoding of --steps tokens per prompt, plain and
with each --draft (prompt lookup, as chains or trees of continuations, a draft model run
locally; an entry may carry --draft-max and --draft-branches); tokens/s summed over the
prompts, the ratio, the drafts kept and the tokens per pass (a pass is one round trip per
layer), and whether the ids are the same."""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from larql_procs import heldout_prompts, layer_count, start_proxies, start_shard, stop  # noqa: E402


def decode(larql, model, spec, wire, prompt, steps, extra):
    out = subprocess.run([larql, "run", model, "--prompt", prompt, "--steps", str(steps), "--ignore-eos", "--json",
                          "--threads", "2", "--ffn", spec, "--wire", wire] + extra, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?", default="models/demo")
    ap.add_argument("--larql", default="build/larql")
    ap.add_argument("--proxy", default="build/bench/link_proxy")
    ap.add_argument("--links", default="100Mbit/20ms,100Mbit/2ms")
    ap.add_argument("--prompts", type=int, default=5)
    ap.add_argument("--steps", type=int, default=128)
    ap.add_argument("--wire", default="f16")
    ap.add_argument("--drafts", default="lookup,lookup --draft-max 16 --draft-branches 4,models/demo-draft",
                    help="--draft values (with their --draft-max and --draft-branches), each measured against plain")
    a = ap.parse_args()
    drafts = [d.split() for d in a.drafts.split(",")]
    drafts = [d for d in drafts if d[0] == "lookup" or d[0].startswith("lookup:") or os.path.exists(d[0])]
    prompts = heldout_prompts(a.prompts)
    n = layer_count(a.model)
    half = n // 2
    shards = [start_shard(a.larql, a.model, f"0-{half - 1}", 1), start_shard(a.larql, a.model, f"{half}-{n - 1}", 1)]
    try:
        print(f"model {a.model}, {a.wire}, {len(prompts)} held-out prompts x {a.steps} greedy tokens, two shards behind "
              f"link_proxy; plain and each --draft in the same run")
        print(f"{'link':>14s} {'draft':>36s} {'plain tok/s':>11s} {'draft tok/s':>11s} {'ratio':>6s} {'kept/drafted':>13s} "
              f"{'tokens/pass':>11s} {'same ids':>8s}")
        for link in a.links.split(","):
            proxies = start_proxies(a.proxy, [url for _, url in shards], link)
            try:
                spec = f"0-{half - 1}={proxies[0][1]},{half}-{n - 1}={proxies[1][1]}"
                plain = [decode(a.larql, a.model, spec, a.wire, p, a.steps, []) for p in prompts]
                plain_s = sum((len(r["generated_ids"]) - 1) / r["tokens_per_second"] for r in plain)
                for draft in drafts:
                    spec_s = 0.0
                    tokens = kept = drafted = passes = 0
                    same = True
                    for p, base in zip(prompts, plain):
                        fast = decode(a.larql, a.model, spec, a.wire, p, a.steps, ["--draft"] + draft)
                        same &= base["generated_ids"] == fast["generated_ids"]
                        spec_s += (len(fast["generated_ids"]) - 1) / fast["tokens_per_second"]
                        tokens += len(fast["generated_ids"]) - 1
                        kept += fast["accepted"]
                        drafted += fast["drafted"]
                        passes += fast["passes"]
                    print(f"{link:>14s} {' '.join([os.path.basename(draft[0])] + draft[1:]):>36s} {tokens / plain_s:11.2f} {tokens / spec_s:11.2f} "
                          f"{plain_s / spec_s:6.2f} {kept:>6d}/{drafted:<6d} {tokens / passes:11.2f} {str(same):>8s}", flush=True)
            finally:
                stop(proxies)
    finally:
        stop(shards)


if __name__ == "__main__":
    main()
