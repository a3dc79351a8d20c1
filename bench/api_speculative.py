#!/usr/bin/env python3
"""Speculative decoding through `larql api` with continuous batching, over an emulated link,
against plain batching through the same proxies in the same run (issue 50).

  bench/api_speculative.py [MODEL] [--larql build/larql] [--proxy build/bench/link_proxy]
      [--link 100Mbit/20ms] [--clients 4] [--tokens 128] [--wire f16] [--rounds 2]
      [--drafts "lookup,lookup --draft-max 16 --draft-branches 4,models/demo-draft"]

Two shards (half the layers each) on loopback, each behind a bench/link_proxy; `larql api`
with --parallel = clients, plain and with each --draft (one server each, one after the
other, rounds interleaved). Each client streams one greedy completion of --tokens tokens
from the first words of its own held-out KJV verse (tests/data/kjv-heldout.txt). Reported:
aggregate tokens/s (all clients' tokens over the round's wall time), engine steps (one
FFN round trip per layer each), the drafts kept, and whether every client's text is the
same with and without drafts."""
import argparse
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from larql_procs import add_grid_arguments, completion, heldout_prompts, metric, start, start_halves_behind_proxies, stop  # noqa: E402


def complete(url, prompt, tokens, out, i):
    doc = completion(url, prompt, tokens, timeout=900)
    out[i] = (doc["choices"][0]["text"], doc["usage"]["completion_tokens"])


def round_of(url, prompts, tokens):
    out = [None] * len(prompts)
    threads = [threading.Thread(target=complete, args=(url, p, tokens, out, i)) for i, p in enumerate(prompts)]
    start_time = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - start_time
    return [o[0] for o in out], sum(o[1] for o in out) / wall


def main():
    ap = argparse.ArgumentParser()
    add_grid_arguments(ap)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--drafts", default="lookup,lookup --draft-max 16 --draft-branches 4,models/demo-draft",
                    help="--draft values (with their --draft-max and --draft-branches), each against plain batching")
    a = ap.parse_args()
    configs = [("plain", [])] + [(d, ["--draft"] + d.split()) for d in a.drafts.split(",") if d.strip()]
    prompts = heldout_prompts(a.clients)
    grid, spec = start_halves_behind_proxies(a.larql, a.proxy, a.model, a.link)
    try:
        rates = {name: [] for name, _ in configs}
        texts, steps, kept = {}, {}, {}
        for _ in range(a.rounds):
            for name, extra in configs:
                api = start([a.larql, "api", a.model, "--port", "0", "--ffn", spec, "--wire", a.wire, "--parallel", str(a.clients),
                             "--threads", "2"] + extra, "larql api", health=None)
                try:
                    texts[name], rate = round_of(api[1], prompts, a.tokens)
                    rates[name].append(rate)
                    steps[name] = metric(api[1], "larql_api_engine_steps_total")
                    kept[name] = (metric(api[1], "larql_api_draft_tokens_accepted_total"), metric(api[1], "larql_api_draft_tokens_total"))
                finally:
                    stop([api])
        plain = statistics.median(rates["plain"])
        print(f"model {a.model}, {a.wire}, {a.clients} concurrent clients x {a.tokens} greedy tokens (held-out prompts), "
              f"two shards behind link_proxy {a.link}, larql api --parallel {a.clients}; medians of {a.rounds} rounds")
        print(f"plain batching: {plain:7.2f} tok/s aggregate, {steps['plain']:.0f} engine steps")
        for name, _ in configs[1:]:
            fast = statistics.median(rates[name])
            print(f"--draft {os.path.basename(name)}: {fast:7.2f} tok/s aggregate ({fast / plain:.2f}x), {steps[name]:.0f} engine steps, "
                  f"{kept[name][0]:.0f} of {kept[name][1]:.0f} drafts kept, same texts: {texts['plain'] == texts[name]}")
    finally:
        stop(grid)


if __name__ == "__main__":
    main()
