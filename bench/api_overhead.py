#!/usr/bin/env python3
"""What serving through `larql api` costs against `larql run` on the same model, interleaved
in one run: decode tok/s of a greedy completion (streamed, tokens counted as SSE chunks
arrive) and the time to the first token, medians over repetitions; with --logprobs N also
the same completion asking for each token's log-probability and N alternatives; with
--json-schema the same completion under response_format json_schema (constrained decoding:
the allowed-token mask at every step; the answer may close before --steps).

  bench/api_overhead.py MODEL [--larql build/larql] [--reps 5] [--steps 64] [--threads 2] [--logprobs N] [--json-schema]"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from larql_procs import start, stop, stream_completion  # noqa: E402


# The structured-output test's schema, with a free string last so answers run long.
PERSON = {"type": "json_schema", "json_schema": {"name": "person", "schema": {
    "type": "object", "required": ["name", "age", "colours", "home", "story"],
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                   "colours": {"type": "array", "items": {"enum": ["red", "green", "blue"]}},
                   "home": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
                   "story": {"type": "string"}}}}}


def api_run(url, prompt_ids, steps, extra=None):
    start = time.monotonic()
    first = last = None
    tokens = 0
    for now, chunk in stream_completion(url, prompt_ids, steps, timeout=600, extra=extra):
        if chunk.get("usage"):
            tokens = chunk["usage"]["completion_tokens"]
        elif chunk["choices"][0]["finish_reason"]:
            last = now
        elif first is None:
            first = now
    # decode rate from the first token to the last (as larql run reports it); a token whose
    # text is not complete yet (part of a character) sends no chunk, so count by usage
    return first - start, (tokens - 1) / (last - first) if tokens > 1 else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--larql", default="build/larql")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--logprobs", type=int, help="also measure the API asked for logprobs N")
    ap.add_argument("--json-schema", action="store_true", help="also measure the API under a response_format json_schema")
    a = ap.parse_args()
    prompt = [1, 2, 3, 4, 5, 6, 7, 8]
    proc, url = start([a.larql, "api", a.model, "--port", "0", "--threads", str(a.threads)], "larql api", health=None)
    try:
        run_tps, api_tps, run_first, api_first, logprobs_tps, schema_tps = [], [], [], [], [], []
        for rep in range(a.reps + 1):  # rep 0 warms the page cache and is dropped
            out = subprocess.run([a.larql, "run", a.model, "--prompt-ids", ",".join(map(str, prompt)), "--steps", str(a.steps),
                                  "--ignore-eos", "--json", "--threads", str(a.threads)], check=True, capture_output=True,
                                 text=True).stdout
            d = json.loads(out)
            first, tps = api_run(url, prompt, a.steps)
            with_logprobs = api_run(url, prompt, a.steps, {"logprobs": a.logprobs})[1] if a.logprobs is not None else 0
            with_schema = api_run(url, prompt, a.steps, {"response_format": PERSON})[1] if a.json_schema else 0
            if rep:
                schema_tps.append(with_schema)
                logprobs_tps.append(with_logprobs)
                run_tps.append(d["tokens_per_second"])
                run_first.append(len(prompt) / d["prefill_tokens_per_second"])
                api_tps.append(tps)
                api_first.append(first)
                print(f"rep {rep}: run {d['tokens_per_second']:.2f} tok/s, api {tps:.2f} tok/s, api first token {first * 1000:.0f} ms",
                      flush=True)
        print(f"\nmodel {a.model}, {a.steps} tokens, {a.threads} threads, medians of {a.reps}:")
        print(f"  larql run  {statistics.median(run_tps):7.2f} tok/s   prefill of the prompt {statistics.median(run_first) * 1000:6.0f} ms")
        print(f"  larql api  {statistics.median(api_tps):7.2f} tok/s   first token (HTTP, prefill) {statistics.median(api_first) * 1000:6.0f} ms")
        print(f"  api / run  {statistics.median(api_tps) / statistics.median(run_tps):7.3f}")
        if a.logprobs is not None:
            print(f"  larql api, logprobs {a.logprobs}: {statistics.median(logprobs_tps):7.2f} tok/s, "
                  f"{statistics.median(logprobs_tps) / statistics.median(api_tps):.3f}x the api without")
        if a.json_schema:
            print(f"  larql api, json_schema: {statistics.median(schema_tps):7.2f} tok/s, "
                  f"{statistics.median(schema_tps) / statistics.median(api_tps):.3f}x the api without")
    finally:
        stop([(proc, url)])


if __name__ == "__main__":
    main()
