#!/usr/bin/env python3
"""The prompt prefix cache of `larql api`, with the cache (the default) and without it
(--cache-bytes 0), in one run.

  bench/api_prefix_cache.py MODEL [--tokenizer FILE] [--larql build/larql] [--threads 2]
      [--chat 8] [--words 300] [--max-tokens 16]
      [--agents 16] [--system-tokens 2000] [--user-tokens 50] [--parallel 4]
      [--memory 1000] [--cache-mib 64]
      [--sessions --layers N --link 100Mbit/20ms --ctx 8192]

chat: turn 1's prompt is --words words of held-out KJV text (tests/data/kjv-heldout.txt);
each later turn's prompt is the previous one, its answer's text and --words more words.
Reported per turn: its prompt's tokens, the cached ones, and the time to its first token
(streamed, greedy) both ways. Every turn's text must be the same both ways.

agents: --agents requests, each a --system-tokens prompt (the same for all) and a
--user-tokens message of its own, sent together to a server that runs --parallel at a
time; the total time both ways, every answer the same.

memory: --memory requests, each a random choice of 4 prefixes (64–256 tokens) and a random
tail, one at a time, to a server with --cache-bytes of --cache-mib; its resident memory
(VmRSS) at the start (weights placed) and its peak after, against weights + cache bound +
one sequence's KV.

--sessions: the model's layers on two session shards (`larql serve --sessions`, half the
layers each, one thread each), each behind a bench/link_proxy emulating --link, and `larql
api --remote-layers` through them (f32): the kept sequences are sessions on the shards,
continued by forks. Fresh shards for each configuration."""
import argparse
import json
import os
import random
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from larql_procs import rss_mb, start, start_proxies, start_shard, stop, stream_completion  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def heldout_words():
    with open(os.path.join(ROOT, "tests", "data", "kjv-heldout.txt")) as f:
        return f.read().split()


def tokenize(url, text):
    req = urllib.request.Request(url + "/tokenize", data=json.dumps({"content": text}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())["tokens"]


def streamed(url, prompt, max_tokens):
    """(seconds to the first token, text, usage) of a greedy streamed completion."""
    sent, first, text, usage = time.monotonic(), None, "", {}
    for t, chunk in stream_completion(url, prompt, max_tokens, 3600):
        if chunk.get("choices"):
            first = first or t
            text += chunk["choices"][0].get("text", "")
        if chunk.get("usage"):
            usage = chunk["usage"]
    return first - sent, text, usage


class Api:
    """`larql api` (and, with --sessions, its shards and proxies) for one configuration."""

    def __init__(self, a, cache_bytes=None, parallel=None):
        self.procs = []
        extra = []
        if a.sessions:
            half = a.layers // 2
            ranges = [f"0-{half - 1}", f"{half}-{a.layers - 1}"]
            shards = [start_shard(a.larql, a.model, r, 1, ("--sessions",)) for r in ranges]
            proxies = start_proxies(a.proxy, [url for _, url in shards], a.link)
            self.procs = proxies + shards
            extra = ["--remote-layers", ",".join(f"{r}={url}" for r, (_, url) in zip(ranges, proxies)), "--wire", "f32",
                     "--ctx", str(a.ctx)]
        self.proc, self.url = api(a, cache_bytes, parallel, extra)
        self.procs.insert(0, (self.proc, self.url))

    def stop(self):
        stop(self.procs)


def api(a, cache_bytes=None, parallel=None, extra=()):
    cmd = [a.larql, "api", a.model, "--port", "0", "--threads", str(a.threads), *extra]
    if a.tokenizer:
        cmd += ["--tokenizer", a.tokenizer]
    if cache_bytes is not None:
        cmd += ["--cache-bytes", str(cache_bytes)]
    if parallel:
        cmd += ["--parallel", str(parallel)]
    return start(cmd, "larql api", health="/health", deadline_s=300)


def chat(a, words):
    runs = {}
    for name, cache in (("cache", None), ("no cache", 0)):
        server = Api(a, cache)
        try:
            streamed(server.url, "In the beginning", 2)  # warm: weights and buffers touched
            prompt, turns = "", []
            for turn in range(a.chat):
                prompt += " ".join(words[turn * a.words:(turn + 1) * a.words]) + "\n"
                ttft, text, usage = streamed(server.url, prompt, a.max_tokens)
                cached = usage.get("prompt_tokens_details", {}).get("cached_tokens", 0)
                turns.append((usage.get("prompt_tokens", 0), cached, ttft, text))
                prompt += text + "\n"
            runs[name] = turns
        finally:
            server.stop()
    where = f"over two session shards behind {a.link}" if a.sessions else "local"
    print(f"chat ({where}): {a.chat} turns of {a.words} new words, max_tokens {a.max_tokens}, {a.threads} threads")
    print("| turn | prompt tokens | cached | TTFT with cache | TTFT without | ratio |")
    print("|---|---|---|---|---|---|")
    for i, (w, wo) in enumerate(zip(runs["cache"], runs["no cache"])):
        if w[3] != wo[3]:
            sys.exit(f"turn {i + 1}: the texts differ with and without the cache: {w[3]!r} / {wo[3]!r}")
        print(f"| {i + 1} | {w[0]} | {w[1]} | {w[2]:.3f} s | {wo[2]:.3f} s | {wo[2] / w[2]:.1f}x |")
    print("every turn's text identical both ways")


def agents(a, words):
    results = {}
    for name, cache in (("cache", None), ("no cache", 0)):
        server = Api(a, cache, a.parallel)
        try:
            url = server.url
            streamed(url, "In the beginning", 2)
            ids = tokenize(url, " ".join(words))
            system = ids[:a.system_tokens]
            prompts = [system + ids[a.system_tokens + i * a.user_tokens:a.system_tokens + (i + 1) * a.user_tokens]
                       for i in range(a.agents)]
            texts, threads = [None] * a.agents, []

            def one(i):
                texts[i] = streamed(url, prompts[i], a.max_tokens)[1]

            began = time.monotonic()
            for i in range(a.agents):
                threads.append(threading.Thread(target=one, args=(i,)))
                threads[-1].start()
            for t in threads:
                t.join()
            results[name] = (time.monotonic() - began, texts)
        finally:
            server.stop()
    if results["cache"][1] != results["no cache"][1]:
        sys.exit("agents: the answers differ with and without the cache")
    w, wo = results["cache"][0], results["no cache"][0]
    print(f"agents: {a.agents} requests sharing {a.system_tokens} tokens, {a.user_tokens} of their own, "
          f"--parallel {a.parallel}: {w:.2f} s with the cache, {wo:.2f} s without ({wo / w:.1f}x); answers identical")


def memory(a, words):
    cache_bytes = a.cache_mib << 20
    proc, url = api(a, cache_bytes)
    try:
        streamed(url, "In the beginning", 2)
        base = rss_mb(proc.pid)
        ids = tokenize(url, " ".join(words))
        rng = random.Random(1)
        prefixes = [ids[i * 600:i * 600 + rng.randint(64, 256)] for i in range(4)]
        peak, longest = base, 0
        for i in range(a.memory):
            tail_at = rng.randrange(0, len(ids) - 64)
            prompt = rng.choice(prefixes) + ids[tail_at:tail_at + rng.randint(1, 64)]
            longest = max(longest, len(prompt) + 8)
            streamed(url, prompt, 8)
            if i % 50 == 49:
                peak = max(peak, rss_mb(proc.pid))
        peak = max(peak, rss_mb(proc.pid))
        with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
            page = r.read().decode()
        hits = next(float(l.split()[1]) for l in page.splitlines() if l.startswith("larql_api_prefix_cache_hits_total "))
    finally:
        stop([(proc, url)])
    print(f"memory: {a.memory} requests over 4 random prefixes, --cache-bytes {a.cache_mib} MiB: resident {base:.0f} MiB "
          f"after start, peak {peak:.0f} MiB (+{peak - base:.0f} MiB; bound {a.cache_mib} MiB + one sequence's KV of "
          f"{longest} positions), {hits:.0f} hits")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--tokenizer")
    ap.add_argument("--larql", default=os.path.join(ROOT, "build", "larql"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--chat", type=int, default=8, help="turns (0: none)")
    ap.add_argument("--words", type=int, default=300)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--agents", type=int, default=16, help="requests (0: none)")
    ap.add_argument("--system-tokens", type=int, default=2000)
    ap.add_argument("--user-tokens", type=int, default=50)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--memory", type=int, default=0, help="requests (0: none)")
    ap.add_argument("--cache-mib", type=int, default=64)
    ap.add_argument("--sessions", action="store_true", help="the layers on two session shards behind link proxies")
    ap.add_argument("--layers", type=int, default=16, help="with --sessions: the model's layer count")
    ap.add_argument("--link", default="100Mbit/20ms")
    ap.add_argument("--proxy", default=os.path.join(ROOT, "build", "bench", "link_proxy"))
    ap.add_argument("--ctx", type=int, default=8192, help="with --sessions: each sequence's positions (reserved on the shards)")
    a = ap.parse_args()
    words = heldout_words()
    if a.chat:
        chat(a, words)
    if a.agents:
        agents(a, words)
    if a.memory:
        memory(a, words)


if __name__ == "__main__":
    main()
