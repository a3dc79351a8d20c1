"""What the PyTorch references (gemma_reference.py, moe_reference.py, gpt_oss_reference.py) share: reading a
safetensors file into torch tensors, rotate-half RoPE's rotation, and the command line that
prints a checkpoint's logits and greedy continuation as JSON."""
import argparse
import json
import os
import struct

import torch

DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16, "U8": torch.uint8}


def read_safetensors(path):
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        data = f.read()
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        t = torch.frombuffer(bytearray(data[begin:end]), dtype=DTYPES[info["dtype"]])
        tensors[name] = t.reshape(info["shape"])
    return tensors


def read_checkpoint_tensors(path):
    """Every tensor of a checkpoint directory's *.safetensors files, by name."""
    tensors = {}
    for name in sorted(os.listdir(path)):
        if name.endswith(".safetensors"):
            tensors.update(read_safetensors(os.path.join(path, name)))
    return tensors


def read_config(path):
    with open(os.path.join(path, "config.json")) as f:
        return json.load(f)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def main(description, load_model):
    """CHECKPOINT --tokens a,b,c [--greedy N]: {"tokens", "logits", "greedy"} on stdout, and
    "router_margin" for models that route (their smallest k-th/(k+1)-th router logit gap)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("checkpoint")
    parser.add_argument("--tokens", required=True, help="comma-separated token ids")
    parser.add_argument("--greedy", type=int, default=8, help="greedy steps after the tokens")
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = load_model(args.checkpoint)
    tokens = [int(t) for t in args.tokens.split(",")]
    with torch.no_grad():
        logits = model.forward(tokens)
        sequence = list(tokens)
        for _ in range(args.greedy):
            sequence.append(int(model.forward(sequence)[-1].argmax()))
    out = {"tokens": tokens, "logits": [[float(v) for v in row] for row in logits], "greedy": sequence[len(tokens):]}
    if getattr(model, "margin", None) is not None:
        out["router_margin"] = model.margin
    print(json.dumps(out))
