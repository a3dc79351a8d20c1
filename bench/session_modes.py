#!/usr/bin/env python3
"""FFN mode against layer-range sessions (PROTOCOL §13) on the same session shards.

  bench/session_modes.py [MODEL] [--larql build/larql] [--proxy build/bench/link_proxy]
      [--link 100Mbit/20ms] [--steps 32] [--wire f32,f16] [--draft models/demo-draft]
      [--draft-prompts 5] [--draft-steps 128] [--accuracy-prompts 20] [--accuracy-steps 50] [--ranges 2]

Starts the model's layers over `--ranges` session shards (`larql serve --sessions`, i8 on
both kinds of request), each behind its own bench/link_proxy emulating `--link`, then:
- distance: for each wire format, `larql run --ffn MAP` (a round trip per layer) and
  `larql run --remote-layers MAP` (one per range), greedy, in the same run, with a local run
  for the ids and the local time per token C; the ratio of session to FFN mode, and the
  bound (L·rtt + C)/(R·rtt + C) it is compared with; with --draft, sessions with drafts;
- drafts over held-out text (with --draft and --draft-prompts > 0): FFN mode, session mode
  and session mode with the draft over the first words of that many held-out verses,
  --draft-steps tokens each, summed (what drafts add follows the text: one prompt of 32
  tokens is a small sample);
- accuracy (with --accuracy-prompts > 0): `larql bench --local` teacher-forced over
  prompts × steps, in FFN mode and in session mode straight to the shards (no proxy):
  top-1, top-5, mean and max KL per wire format, side by side."""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from larql_procs import heldout_prompts, kill, layer_count, start, start_proxies, stop  # noqa: E402


def run_json(larql, model, args):
    r = subprocess.run([larql, "run", model, "--json", *args], capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        sys.exit(f"larql run {' '.join(args)} failed: {r.stderr}")
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?", default="models/demo")
    ap.add_argument("--larql", default="build/larql")
    ap.add_argument("--proxy", default="build/bench/link_proxy")
    ap.add_argument("--link", default="100Mbit/20ms")
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--wire", default="f32,f16")
    ap.add_argument("--draft")
    ap.add_argument("--draft-prompts", type=int, default=0)
    ap.add_argument("--draft-steps", type=int, default=128)
    ap.add_argument("--ranges", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="each shard's")
    ap.add_argument("--client-threads", type=int, default=2)
    ap.add_argument("--accuracy-prompts", type=int, default=0)
    ap.add_argument("--accuracy-steps", type=int, default=50)
    ap.add_argument("--accuracy-wire", default="f32,f16,q8,i8")
    ap.add_argument("--layers", type=int, help="the model's layer count (needed for a GGUF file)")
    ap.add_argument("--router", action="store_true",
                    help="the shards (two replicas a range) on loopback behind a router, the link only between the client "
                         "and the router: one round trip a token in session mode")
    ap.add_argument("--prompt-ids", help="a prompt of token ids (a model without a tokenizer of its own)")
    a = ap.parse_args()

    layers = a.layers or (layer_count(a.model) if os.path.isdir(a.model) else None)
    if layers is None:
        sys.exit("--layers N: a GGUF file's layer count is not read here")
    per = (layers + a.ranges - 1) // a.ranges
    ranges = [f"{f}-{min(layers, f + per) - 1}" for f in range(0, layers, per)]
    replicas = 2 if a.router else 1
    shards = [start([a.larql, "serve", a.model, "--port", "0", "--layers", r, "--threads", str(a.threads), "--sessions",
                     "--wire-i8", "--session-wire-i8"], f"shard {r}") for r in ranges for _ in range(replicas)]
    procs = list(shards)
    try:
        urls = [url for _, url in shards]
        direct = ",".join(f"{r}=" + "|".join(urls[i * replicas:(i + 1) * replicas]) for i, r in enumerate(ranges))
        if a.router:
            router = start([a.larql, "router", "--port", "0", "--shards", direct], "router")
            procs.append(router)
            proxies = start_proxies(a.proxy, [router[1]], a.link)
            procs += proxies
            far = proxies[0][1]
        else:
            proxies = start_proxies(a.proxy, urls, a.link)
            procs += proxies
            far = ",".join(f"{r}={url}" for r, (_, url) in zip(ranges, proxies))
        rtt_ms = float(a.link.split("/")[1].removesuffix("ms"))
        prompt = ["--prompt-ids", a.prompt_ids] if a.prompt_ids else ["--prompt", "And God said,"]
        base = [*prompt, "--steps", str(a.steps), "--ignore-eos", "--threads", str(a.client_threads)]
        local = run_json(a.larql, a.model, base)
        c_ms = 1000 / local["tokens_per_second"] if local["tokens_per_second"] else 0
        where = "behind a router, the link between client and router" if a.router else "the link to each shard"
        print(f"# {a.model}: {layers} layers over {len(ranges)} ranges of session shards ({', '.join(ranges)}), {where}, "
              f"{a.link}, {a.steps} tokens; local {local['tokens_per_second']:.1f} tok/s (C = {c_ms:.2f} ms)")
        print("| wire | FFN mode tok/s | session mode tok/s | ratio | bound (L·r + C)/(hops·r + C) | round trips a pass (FFN, sessions) |"
              " ids = local (FFN, sessions) |" + (" sessions + draft tok/s | its ratio to FFN mode | tokens a pass |" if a.draft else ""))
        print("|---|---|---|---|---|---|---|" + ("---|---|---|" if a.draft else ""))
        for w in a.wire.split(","):
            ffn = run_json(a.larql, a.model, [*base, "--wire", w, "--ffn", far])
            ses = run_json(a.larql, a.model, [*base, "--wire", w, "--remote-layers", far])
            hops = 1 if a.router else len(ranges)
            bound = (layers * rtt_ms + c_ms) / (hops * rtt_ms + c_ms)
            row = (f"| {w} | {ffn['tokens_per_second']:.2f} | {ses['tokens_per_second']:.2f} | "
                   f"{ses['tokens_per_second'] / ffn['tokens_per_second']:.2f}× | {bound:.2f}× | {layers}, "
                   f"{ses['round_trips_per_pass']:.1f} | {ffn['generated_ids'] == local['generated_ids']}, "
                   f"{ses['generated_ids'] == local['generated_ids']} |")
            if a.draft:
                d = run_json(a.larql, a.model, [*base, "--wire", w, "--remote-layers", far, "--draft", a.draft])
                row += (f" {d['tokens_per_second']:.2f} | {d['tokens_per_second'] / ffn['tokens_per_second']:.2f}× | "
                        f"{d.get('tokens_per_pass', 0):.2f} (ids = local: {d['generated_ids'] == local['generated_ids']}) |")
            print(row, flush=True)

        if a.draft and a.draft_prompts > 0:
            prompts = heldout_prompts(a.draft_prompts)
            print(f"\n# drafts over held-out text: {a.draft_prompts} prompts × {a.draft_steps} tokens, summed")
            print("| wire | FFN mode tok/s | session mode tok/s | sessions + draft tok/s | draft ÷ sessions | draft ÷ FFN mode |"
                  " tokens a pass | ids = local |")
            print("|---|---|---|---|---|---|---|---|")

            def over_prompts(extra):
                tokens = seconds = passes = 0
                ids = []
                for p in prompts:
                    r = run_json(a.larql, a.model, ["--prompt", p, "--steps", str(a.draft_steps), "--ignore-eos", "--threads",
                                                    str(a.client_threads), *extra])
                    tokens += len(r["generated_ids"])
                    seconds += len(r["generated_ids"]) / r["tokens_per_second"]
                    passes += r.get("passes", 0)
                    ids.append(r["generated_ids"])
                return tokens / seconds, (tokens - len(prompts)) / max(passes, 1), ids

            truth = over_prompts([])[2]
            for w in a.wire.split(","):
                ffn = over_prompts(["--wire", w, "--ffn", far])
                ses = over_prompts(["--wire", w, "--remote-layers", far])
                d = over_prompts(["--wire", w, "--remote-layers", far, "--draft", a.draft])
                same = ffn[2] == truth and ses[2] == truth and d[2] == truth
                print(f"| {w} | {ffn[0]:.2f} | {ses[0]:.2f} | {d[0]:.2f} | {d[0] / ses[0]:.2f}× | {d[0] / ffn[0]:.2f}× | "
                      f"{d[1]:.2f} | {same} |", flush=True)

        if a.accuracy_prompts > 0:
            prompts_file = "/tmp/larql_session_modes_prompts.txt"
            with open(prompts_file, "w") as f:
                f.write("\n".join(heldout_prompts(a.accuracy_prompts)) + "\n")
            print(f"\n# teacher-forced accuracy against the local run: {a.accuracy_prompts} prompts × {a.accuracy_steps} steps")
            print("| wire | mode | top-1 | top-5 | mean KL | max KL | bytes a token | round trips a token |")
            print("|---|---|---|---|---|---|---|---|")
            reports = {}
            for mode, flag in (("FFN mode", "--ffn"), ("sessions", "--remote-layers")):
                r = subprocess.run([a.larql, "bench", a.model, flag, direct, "--local", "--prompts", prompts_file, "--steps",
                                    str(a.accuracy_steps), "--wire", a.accuracy_wire, "--json"], capture_output=True, text=True,
                                   timeout=3600)
                if r.returncode != 0:
                    sys.exit(f"larql bench {flag} failed: {r.stderr}")
                reports[mode] = json.loads(r.stdout)
            for w in a.accuracy_wire.split(","):
                for mode, doc in reports.items():
                    fmt = next(x for x in doc["formats"] if x["wire"] == w)
                    print(f"| {w} | {mode} | {fmt['top1_agreement']:.4f} | {fmt['topk_agreement']:.4f} | {fmt['mean_kl']:.3g} | "
                          f"{fmt['max_kl']:.3g} | {fmt['bytes_sent_per_token'] + fmt['bytes_received_per_token']:.0f} | "
                          f"{fmt['round_trips_per_token']:.1f} |")
            print(f"(steps compared per mode: {reports['sessions']['total_steps']})")
        stop(procs)
    except BaseException:
        kill(procs)
        raise


if __name__ == "__main__":
    main()
