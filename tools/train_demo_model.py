#!/usr/bin/python3
"""Trains larql's demo model: a small Llama on the King James Bible.

    make train-demo-model            # installs the packages, then runs this
    make train-demo-moe-model        # the mixture-of-experts variant (models/demo-moe)

Run with Debian's /usr/bin/python3 (python3-torch; libopenblas0-pthread so
torch does not fall back to the reference BLAS). Writes a Hugging Face
directory (config.json, generation_config.json, model.safetensors in bf16,
tokenizer.json) plus reference.json (PyTorch's greedy continuations of the
bf16 weights, for larql's parity test) and training-log.json.
Deterministic for a given seed and thread count.
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from demo_model import bpe, corpus, export, llama  # noqa: E402

REFERENCE_PROMPTS = ["In the beginning", "And the LORD said unto Moses,", "Blessed are the"]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    p.add_argument("--out", default="models/demo", help="output directory (default: %(default)s)")
    p.add_argument("--steps", type=int, default=1500, help="optimizer steps (default: %(default)s)")
    p.add_argument("--batch", type=int, default=16, help="sequences per step (default: %(default)s)")
    p.add_argument("--seq", type=int, default=256, help="tokens per sequence incl. BOS (default: %(default)s)")
    p.add_argument("--lr", type=float, default=1.5e-3, help="peak learning rate (default: %(default)s)")
    p.add_argument("--eval-every", type=int, default=100, help="steps between validation runs")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--ffn", type=int, default=1024, help="FFN width (each expert's, with --experts)")
    p.add_argument("--experts", type=int, default=0, help="Mixtral experts per layer (0: dense Llama)")
    p.add_argument("--experts-per-token", type=int, default=2)
    p.add_argument("--aux-loss", type=float, default=0.01, help="weight of the experts' load-balancing loss")
    p.add_argument("--tokenizer", help="reuse this tokenizer.json instead of training one (e.g. models/demo's)")
    p.add_argument("--references-only", action="store_true",
                   help="do not train: rewrite OUT/reference.json from the model already in OUT")
    return p.parse_args()


def tokenize_verses(tok, chapters):
    """One token stream with "\\n" between verses, and the offset each verse starts at."""
    stream, starts = [], []
    newline = tok.encode("\n")
    for _, verses in chapters:
        for verse in verses:
            starts.append(len(stream))
            stream += tok.encode(verse) + newline
    return torch.tensor(stream), torch.tensor(starts)


def batch_at(stream, starts, bos, seq, picks):
    """Sequences of BOS + text starting at a verse: the shape of a user's prompt."""
    rows = []
    for s in picks.tolist():
        s = min(starts[s].item(), len(stream) - seq)
        rows.append(torch.cat([torch.tensor([bos]), stream[s:s + seq - 1]]))
    return torch.stack(rows)


def lr_at(step, args):
    warmup = 100
    if step < warmup:
        return args.lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, args.steps - warmup)
    return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def loss_of(model, batch):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(batch[:, :-1])
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))


def aux_loss_of(model):
    """The experts' load-balancing losses of the last forward (0 for a dense model)."""
    return sum((layer.block_sparse_moe.aux for layer in model.model.layers if hasattr(layer, "block_sparse_moe")),
               torch.zeros(()))


@torch.no_grad()
def validation_loss(model, stream, bos, seq):
    """Mean next-token loss over the held-out chapters in consecutive windows."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    step = seq - 1
    for s in range(0, len(stream) - step, step):
        batch = torch.cat([torch.tensor([bos]), stream[s:s + step]]).unsqueeze(0)
        total += loss_of(model, batch).item() * (seq - 1)
        count += seq - 1
    model.train(was_training)
    return total / count


def write_references(model, tok, out_dir):
    """Greedy continuations in f32 of the weights as stored, for larql's parity test."""
    model.eval()
    bos, eos = tok.vocab[bpe.BOS], tok.vocab[bpe.EOS]
    references = []
    for prompt in REFERENCE_PROMPTS:
        ids = [bos] + tok.encode(prompt)
        out = model.greedy(ids, 40, eos)
        references.append({"prompt": prompt, "prompt_ids": ids, "greedy_ids": out, "text": tok.decode(out)})
        print(f"{prompt!r} -> {tok.decode(out)!r}", flush=True)
    with open(os.path.join(out_dir, "reference.json"), "w") as f:
        json.dump({"note": "PyTorch f32 greedy continuations of the bf16 weights (40 tokens)",
                   "references": references}, f, indent=1)


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    if args.references_only:
        write_references(*export.load_model_dir(args.out), args.out)
        return
    t0 = time.time()

    chapters = corpus.read_chapters()
    text = "\n".join(v for _, vs in chapters for v in vs)
    if not text.isascii():
        sys.exit("the pre-tokenizer pattern is spelt for ASCII; the corpus is not")
    train_chapters, val_chapters = corpus.split_chapters(chapters)
    tok = bpe.load(args.tokenizer) if args.tokenizer else \
        bpe.ByteLevelBPE.train(["\n".join(vs) for _, vs in train_chapters], vocab_size=4096)
    bos, eos = tok.vocab[bpe.BOS], tok.vocab[bpe.EOS]
    train_stream, train_starts = tokenize_verses(tok, train_chapters)
    val_stream, _ = tokenize_verses(tok, val_chapters)
    print(f"corpus: {len(train_chapters)} train / {len(val_chapters)} validation chapters, "
          f"{len(train_stream)} / {len(val_stream)} tokens; tokenizer {time.time() - t0:.0f} s", flush=True)

    cfg = llama.Config(vocab_size=len(tok.vocab), hidden_size=384, intermediate_size=args.ffn, num_hidden_layers=args.layers,
                       num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=512, dropout=0.1,
                       num_local_experts=args.experts, num_experts_per_tok=args.experts_per_token)
    model = llama.Llama(cfg)
    print(f"model: {sum(p.numel() for p in model.parameters())} parameters", flush=True)
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(args.seed)

    log, best = [], (float("inf"), None, -1)
    t_train = time.time()
    for step in range(args.steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, args)
        batch = batch_at(train_stream, train_starts, bos, args.seq,
                         torch.randint(len(train_starts), (args.batch,), generator=gen))
        loss = loss_of(model, batch)
        opt.zero_grad(set_to_none=True)
        (loss + args.aux_loss * aux_loss_of(model)).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if (step + 1) % args.eval_every == 0 or step + 1 == args.steps:
            val = validation_loss(model, val_stream, bos, args.seq)
            elapsed = time.time() - t_train
            log.append({"step": step + 1, "train_loss": round(loss.item(), 4), "val_loss": round(val, 4),
                        "minutes": round(elapsed / 60, 2)})
            print(f"step {step + 1:5d}  train {loss.item():.3f}  val {val:.3f}  {elapsed / 60:.1f} min", flush=True)
            if val < best[0]:
                best = (val, {k: v.clone() for k, v in model.state_dict().items()}, step + 1)
    train_minutes = (time.time() - t_train) / 60

    # Ship the best validation checkpoint, rounded to bf16 as stored.
    model.load_state_dict(best[1])
    model.eval()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).float())
    export.save_model_dir(model, tok, args.out)
    final_val = validation_loss(model, val_stream, bos, args.seq)

    write_references(model, tok, args.out)
    summary = {"command": " ".join(["tools/train_demo_model.py"] + sys.argv[1:]), "seed": args.seed,
               "threads": args.threads, "torch": torch.__version__, "steps": args.steps,
               "best_step": best[2], "val_loss_bf16": round(final_val, 4),
               "train_minutes": round(train_minutes, 1), "total_minutes": round((time.time() - t0) / 60, 1),
               "train_tokens": len(train_stream), "val_tokens": len(val_stream), "log": log}
    with open(os.path.join(args.out, "training-log.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(f"done: best step {best[2]}, validation loss {final_val:.3f} (bf16 weights), "
          f"{train_minutes:.1f} min training", flush=True)


if __name__ == "__main__":
    main()
