#!/usr/bin/env python3
"""A long prompt arriving while another sequence decodes, through `larql api` with each
--prefill-chunk, locally and over an emulated link, in one run.

  bench/api_prefill_chunk.py [MODEL] [--larql build/larql] [--proxy build/bench/link_proxy]
      [--link 100Mbit/20ms] [--chunks 64,128,256,512] [--prompt-tokens 440] [--rounds 2] [--base OTHER_LARQL]

First a --prompt-tokens prompt (held-out KJV text, tokenized by the server) alone; then one
client streams a long greedy completion from a short prompt and, once it has its tenth
token, a second client sends the same long prompt. Reported, per chunk size and place
(local; two shards on loopback, each behind a bench/link_proxy): the long prompt's time to
its first token alone and beside the decoding client, and that client's longest gap between
tokens while the long prompt was read (what a larger chunk costs the sequences already
decoding). Medians over the rounds."""
import argparse
import json
import os
import statistics
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from larql_procs import add_grid_arguments, start, start_halves_behind_proxies, stop, stream_completion  # noqa: E402


def heldout_ids(url, count):
    """The first `count` tokens of the held-out chapters, by the server's tokenizer."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "tests", "data", "kjv-heldout.txt")) as f:
        text = f.read()
    req = urllib.request.Request(url + "/tokenize", data=json.dumps({"content": text}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        ids = json.loads(r.read())["tokens"]
    if len(ids) < count:
        sys.exit(f"the held-out text has {len(ids)} tokens, fewer than {count}")
    return ids[:count]


def first_token_seconds(url, prompt):
    sent = time.monotonic()
    return next(t for t, chunk in stream_completion(url, prompt, 1, 600) if chunk.get("choices")) - sent, sent


def one_round(url, long_prompt, decode_tokens):
    """Seconds: the long prompt's first token alone, then beside a decoding client, and that
    client's longest gap meanwhile."""
    for _ in stream_completion(url, "In the beginning", 2, 600):  # a warm server: weights and buffers touched
        pass
    alone, _ = first_token_seconds(url, long_prompt)
    times, started = [], threading.Event()

    def decoder():
        for t, chunk in stream_completion(url, "And the LORD said", decode_tokens, 600):
            if chunk.get("choices"):
                times.append(t)
                if len(times) == 10:
                    started.set()

    thread = threading.Thread(target=decoder)
    thread.start()
    if not started.wait(timeout=600):
        sys.exit("the decoding client never had ten tokens")
    beside, sent = first_token_seconds(url, long_prompt)
    thread.join()
    gaps = [b - a for a, b in zip(times, times[1:]) if b > sent and a < sent + beside]
    return alone, beside, max(gaps) if gaps else 0.0


def main():
    ap = argparse.ArgumentParser()
    add_grid_arguments(ap)
    ap.add_argument("--chunks", default="64,128,256,512")
    ap.add_argument("--prompt-tokens", type=int, default=440)
    ap.add_argument("--decode-tokens", type=int, default=60)
    ap.add_argument("--base", help="another larql binary (an earlier build) run the same way, for comparison")
    a = ap.parse_args()
    chunks = [int(c) for c in a.chunks.split(",")]
    grid, spec = start_halves_behind_proxies(a.larql, a.proxy, a.model, a.link)
    try:
        places = {"local": [], a.link: ["--ffn", spec, "--wire", a.wire]}
        # An earlier build (--base) has no --prefill-chunk: its prompts went in pieces of 64.
        configs = [("this", a.larql, c) for c in chunks] + ([("base", a.base, None)] if a.base else [])
        results = {(b, p, c): [] for b, _, c in configs for p in places}
        prompt = None
        for _ in range(a.rounds):
            for (build, binary, chunk), (place, ffn) in ((c, p) for c in configs for p in places.items()):
                flag = ["--prefill-chunk", str(chunk)] if chunk else []
                api = start([binary, "api", a.model, "--port", "0", "--parallel", "2", "--threads", "2"] + flag + ffn,
                            "larql api", health=None)
                try:
                    prompt = prompt or heldout_ids(api[1], a.prompt_tokens)
                    results[(build, place, chunk)].append(one_round(api[1], prompt, a.decode_tokens))
                finally:
                    stop([api])
        print(f"model {a.model}: a {a.prompt_tokens}-token prompt arriving while another sequence decodes, "
              f"larql api --parallel 2 --threads 2; medians of {a.rounds} rounds")
        print(f"{'build':>5} {'place':>14} {'--prefill-chunk':>15} {'first token alone':>18} {'beside a decoder':>17} "
              f"{'its longest gap':>16}")
        for (build, place, chunk), rows in results.items():
            alone, beside, gap = (statistics.median(r[i] for r in rows) * 1000 for i in range(3))
            print(f"{build:>5} {place:>14} {chunk or 64:>15} {alone:>15.0f} ms {beside:>14.0f} ms {gap:>13.0f} ms")
    finally:
        stop(grid)


if __name__ == "__main__":
    main()
