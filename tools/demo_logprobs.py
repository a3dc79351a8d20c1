#!/usr/bin/python3
"""Log-probabilities of the demo model's greedy continuations, from PyTorch (the model code
of tools/demo_model, f32 compute on the stored weights): the oracle `larql api`'s
`logprobs` are tested against (tests/data/demo_logprobs.json). For each prompt (token ids,
BOS first), each of the first STEPS greedy tokens with its log-softmax over the raw logits
and the five most likely tokens' (ties in id order).

Usage: tools/demo_logprobs.py [--model models/demo] [--steps 8] > tests/data/demo_logprobs.json
Needs Debian's python3-torch (scripts/install-train-deps.sh)."""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from demo_model import bpe, export  # noqa: E402

PROMPTS = ["In the beginning", "And the LORD said unto Moses,"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="models/demo")
    ap.add_argument("--steps", type=int, default=8)
    a = ap.parse_args()
    torch.set_num_threads(2)
    model, tok = export.load_model_dir(a.model)
    out = []
    with torch.no_grad():
        for prompt in PROMPTS:
            ids = [tok.vocab[bpe.BOS]] + tok.encode(prompt)
            steps = []
            seq = list(ids)
            for _ in range(a.steps):
                logits = model(torch.tensor([seq]))[0, -1].double()
                logprobs = torch.log_softmax(logits, dim=-1)
                chosen = int(logits.argmax())
                order = sorted(range(len(logits)), key=lambda i: (-float(logits[i]), i))[:5]
                steps.append({"token": chosen, "logprob": float(logprobs[chosen]),
                              "top": [[i, float(logprobs[i])] for i in order]})
                seq.append(chosen)
            out.append({"prompt": prompt, "prompt_ids": ids, "steps": steps})
    json.dump({"note": "PyTorch log-softmax of the raw logits at each greedy step (tools/demo_logprobs.py)",
               "prompts": out}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
