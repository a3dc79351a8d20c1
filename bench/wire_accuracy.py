#!/usr/bin/env python3
"""Accuracy of each wire format against f32, teacher-forced, on several models, in one run:
for each model two local shards (half the layers each, every encoding offered; for a
mixture-of-experts model, half the experts of every layer each, weighted sums) and
`larql bench --local --json` over ten prompts; one table row per model and encoding.

  bench/wire_accuracy.py [--larql build/larql] [--steps 100] [--out build/wire_accuracy.json]
                         [--only MODEL] [--prompts FILE]

Models: the committed demo model and MoE demo model (models/demo-moe, when present),
../shared/models' aidreams260K and stories260K (when present), a synthetic model with
massive activations written by `larql synth`, the MoE test fixtures (random weights:
Mixtral, Qwen3-MoE, Gemma 4 26B-A4B kind), and with `--only "synth gemma4"` a Gemma 4 E
model at E4B's widths (8 layers, the last 3 KV-shared; vocabulary 4096) with massive
activations, written only when asked for (1.6 GB)."""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from larql_procs import layer_count, start, start_shard  # noqa: E402

PROMPTS = ["In the beginning", "And the LORD said unto Moses,", "Blessed are the", "Hello world", "A quiet machine",
           "The dream of", "Once upon a time", "And it came to pass", "Thou shalt not", "The king of"]


E_MODEL = "synth gemma4 E4B width"


def gemma4_e_model(larql, work, massive):
    """E4B's widths (hidden 2560, 8 heads, 2 KV heads of 256 and 512, FFN 10240, per-layer
    embeddings of 256), 8 layers: S S S S F S S F, the last 3 KV-shared."""
    out = work / "synth-gemma4-e"
    subprocess.run([larql, "synth", "--family", "gemma4", "--out", str(out), "--hidden", "2560", "--heads", "8",
                    "--kv-heads", "2", "--head-dim", "256", "--global-head-dim", "512", "--global-kv-heads", "2",
                    "--separate-values", "--vocab", "4096", "--context", "4096", "--sliding-window", "512", "--ffn", "10240",
                    "--layers", "8", "--sliding-period", "5", "--ple", "256", "--kv-shared", "3", "--seed", "12",
                    "--massive-activations", str(massive)], check=True, stdout=subprocess.DEVNULL)
    return out


def models(root, larql, work, hidden, massive, only):
    shared = root.parent / "shared" / "models"
    synth = work / "synth-massive"
    subprocess.run([larql, "synth", "--out", str(synth), "--hidden", str(hidden), "--layers", "4", "--ffn", str(hidden * 8 // 3),
                    "--heads", str(hidden // 64), "--kv-heads", "2", "--vocab", "512", "--dtype", "f32", "--seed", "11",
                    "--massive-activations", str(massive)],
                   check=True, stdout=subprocess.DEVNULL)
    yield "demo", [str(root / "models" / "demo")], ["--prompts", "PROMPTS"], 6
    if (root / "models" / "demo-moe" / "config.json").exists():
        yield "demo-moe (trained Mixtral, 8 experts top-2)", [str(root / "models" / "demo-moe")], ["--prompts", "PROMPTS"], 4
    yield f"synth H={hidden}, {massive} massive coords", [str(synth)], ["--prompts", "PROMPTS"], 4
    for family in ("mixtral", "qwen3moe", "gemma4moe"):
        fixture = root / "tests" / "data" / "moe" / family
        yield f"{family} fixture (random weights)", [str(fixture)], ["--prompts", "PROMPTS"], layer_count(str(fixture))
    if (shared / "aidreams260K.bin").exists():
        yield "aidreams260K", [str(shared / "aidreams260K.bin"), "--tokenizer", str(shared / "aidreams-tok512.bin")], \
            ["--prompts", "PROMPTS"], 4
    if (shared / "stories260K.bin").exists():  # no tokenizer shipped: ten id prompts, one run each
        yield "stories260K", [str(shared / "stories260K.bin")], ["--prompt-ids", "IDS"], 5
    if only and E_MODEL.startswith(only):
        yield f"{E_MODEL}, {massive} massive coords", [str(gemma4_e_model(larql, work, massive))], ["--prompts", "PROMPTS"], 8


def expert_count(model):
    """Experts per layer of a Hugging Face MoE directory (0: a dense model or another format)."""
    config = pathlib.Path(model) / "config.json"
    if not config.exists():
        return 0
    c = json.loads(config.read_text())
    return c.get("num_local_experts") or c.get("num_experts") or 0


def start_grid(larql, model, layers):
    """Two shards and the --ffn map: half the layers each, or half the experts each (and the
    dense MLPs on the first)."""
    experts = expert_count(model)
    if not experts:
        half = layers // 2
        shards = [start_shard(larql, model, r, 1) for r in (f"0-{half - 1}", f"{half}-{layers - 1}")]
        return shards, f"0-{half - 1}={shards[0][1]},{half}-{layers - 1}={shards[1][1]}"
    halves = (f"0-{experts // 2 - 1}", f"{experts // 2}-{experts - 1}")
    shards = [start([larql, "serve", model, "--port", "0", "--experts", h, "--threads", "1", "--wire-i8"], f"shard {h}")
              for h in halves]
    every = f"0-{layers - 1}"
    return shards, f"{every}/{halves[0]}={shards[0][1]},{every}/{halves[1]}={shards[1][1]},{every}/dense={shards[0][1]}"


def run_bench(larql, model_args, prompt_args, layers, steps, prompts_file):
    shards, spec = start_grid(larql, model_args[0], layers)
    try:
        runs = []
        id_prompts = [[1, 403 + i, 407, 261 + 3 * i, 378] for i in range(10)] if "IDS" in prompt_args else [None]
        for ids in id_prompts:
            args = [a.replace("PROMPTS", prompts_file).replace("IDS", ",".join(map(str, ids or []))) for a in prompt_args]
            done = subprocess.run([larql, "bench", *model_args, *args, "--ffn", spec, "--steps", str(steps), "--local",
                                   "--threads", "1", "--wire", "f32,f16,q8,i8", "--json"], capture_output=True, text=True)
            # Exit 1 with a report: remote f32 not bit-identical to local (a MoE layer's weighted
            # sums added per expert range); the f32 row then shows by how much.
            if done.returncode not in (0, 1) or not done.stdout.startswith("{"):
                sys.exit(f"larql bench failed ({done.returncode}): {done.stderr}")
            runs.append(json.loads(done.stdout))
        return runs
    finally:
        for proc, _ in shards:
            proc.terminate()
            proc.wait()


def merge(runs):
    """Step-weighted means over runs (one run per id prompt for stories260K)."""
    rows = {}
    for r in runs:
        n = r["total_steps"]
        for f in r["formats"]:
            row = rows.setdefault(f["wire"], {"steps": 0, "top1": 0.0, "topk": 0.0, "kl": 0.0, "max_kl": 0.0,
                                              "max_dlogit": 0.0, "bytes": 0.0, "f32_fallbacks": 0})
            row["steps"] += n
            row["top1"] += f["top1_agreement"] * n
            row["topk"] += f["topk_agreement"] * n
            row["kl"] += f["mean_kl"] * n
            row["max_kl"] = max(row["max_kl"], f["max_kl"])
            row["max_dlogit"] = max(row["max_dlogit"], f["max_abs_logit_diff"])
            row["bytes"] = f["bytes_sent_per_token"] + f["bytes_received_per_token"]
            row["f32_fallbacks"] += f["f32_fallbacks"]  # responses sent as f32 instead (PROTOCOL §5)
    for row in rows.values():
        for k in ("top1", "topk", "kl"):
            row[k] /= row["steps"]
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--larql", default="build/larql")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--out", default="build/wire_accuracy.json")
    ap.add_argument("--synth-hidden", type=int, default=1024, help="hidden size of the massive-activation model")
    ap.add_argument("--massive", type=int, default=4, help="its massive coordinates (x100, x300, x600, x1000, ...)")
    ap.add_argument("--only", help="run only the models whose name starts with this (demo, synth, aidreams260K, ...)")
    ap.add_argument("--prompts", help="file of text prompts, one per line (default: ten built-in ones)")
    a = ap.parse_args()
    root = pathlib.Path(__file__).resolve().parent.parent
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        prompts = pathlib.Path(tmp) / "prompts.txt"
        prompts.write_text(pathlib.Path(a.prompts).read_text() if a.prompts else "\n".join(PROMPTS) + "\n")
        print(f"{'model':<44} {'wire':<4} {'steps':>6} {'top-1':>8} {'top-5':>8} {'mean KL':>10} {'max KL':>9} "
              f"{'max|Δlogit|':>11} {'bytes/token':>11} {'f32 fallbacks':>13}")
        for name, model_args, prompt_args, layers in models(root, a.larql, pathlib.Path(tmp), a.synth_hidden, a.massive, a.only):
            if a.only and not name.startswith(a.only):
                continue
            rows = merge(run_bench(a.larql, model_args, prompt_args, layers, a.steps, str(prompts)))
            results[name] = rows
            for wire in ("f32", "f16", "q8", "i8"):
                r = rows[wire]
                print(f"{name:<44} {wire:<4} {r['steps']:>6} {r['top1']:>8.4f} {r['topk']:>8.4f} {r['kl']:>10.2e} "
                      f"{r['max_kl']:>9.2e} {r['max_dlogit']:>11.4f} {r['bytes']:>11.0f} {r['f32_fallbacks']:>13}")
    pathlib.Path(a.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
