#!/usr/bin/python3
"""Reference forward pass for Gemma 2 and Gemma 3 (text) checkpoints, in PyTorch.

Follows transformers' modeling_gemma2.py and modeling_gemma3.py (eager attention) step by
step, without transformers itself (not packaged in Debian): Gemma RMSNorm with (1 + w) in
f32, embeddings x sqrt(hidden) rounded to the embedding's dtype, the norm sandwich, q/k
norms (Gemma 3), rotate-half RoPE with each layer type's base and scaling, attention-score
softcap before the mask (Gemma 2), sliding windows that count the query's own position,
GeGLU with gelu(approximate="tanh"), the tied classifier and the final-logit softcap.

Usage: gemma_reference.py CHECKPOINT_DIR --tokens 2,5,9,... [--greedy N] > reference.json
Writes {"tokens", "logits": [position][vocab], "greedy": [ids]}; greedy continues the
tokens N steps, recomputing the whole sequence each step (no cache, nothing shared with
larql's KV-cache code). Needs Debian's python3-torch (scripts/install-train-deps.sh).
"""
import argparse
import json
import math
import os
import struct

import torch

DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}


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


def text_config(path):
    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    if "text_config" in config:  # Gemma3ForConditionalGeneration
        config = dict(config["text_config"], model_type=config["text_config"].get("model_type", "gemma3_text"))
    return config


def layer_types(config):
    n = config["num_hidden_layers"]
    if "layer_types" in config:
        return config["layer_types"]
    # Gemma2Config: sliding when (i + 1) % 2; Gemma3TextConfig: when (i + 1) % sliding_window_pattern
    period = 2 if config["model_type"] == "gemma2" else config.get("sliding_window_pattern", 6)
    return ["sliding_attention" if (i + 1) % period else "full_attention" for i in range(n)]


def rope_parameters(config):
    """(theta, linear factor) per layer type, from either spelling of the config."""
    if "rope_parameters" in config and "full_attention" in config["rope_parameters"]:
        out = {}
        for kind, p in config["rope_parameters"].items():
            out[kind] = (p["rope_theta"], p.get("factor", 1.0) if p.get("rope_type") == "linear" else 1.0)
        return out
    scaling = config.get("rope_scaling") or {}
    factor = scaling.get("factor", 1.0) if scaling.get("rope_type", scaling.get("type")) == "linear" else 1.0
    full = (config.get("rope_theta", 10000.0), factor)
    if config["model_type"] == "gemma2":
        return {"full_attention": full, "sliding_attention": full}
    # Gemma3RotaryEmbedding for local layers is built with rope_type "default"
    return {"full_attention": full, "sliding_attention": (config.get("rope_local_base_freq", 10000.0), 1.0)}


class Gemma:
    def __init__(self, path):
        self.config = config = text_config(path)
        tensors = {}
        for name in sorted(os.listdir(path)):
            if name.endswith(".safetensors"):
                tensors.update(read_safetensors(os.path.join(path, name)))
        prefix = next(p for p in ("model.", "language_model.model.", "model.language_model.")
                      if p + "embed_tokens.weight" in tensors)
        self.w = {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}
        self.lm_head = tensors.get("lm_head.weight", tensors.get("language_model.lm_head.weight"))
        self.gemma3 = config["model_type"] != "gemma2"
        self.eps = config.get("rms_norm_eps", 1e-6)
        self.heads = config["num_attention_heads"]
        self.kv_heads = config["num_key_value_heads"]
        self.head_dim = config["head_dim"]
        self.scaling = config["query_pre_attn_scalar"] ** -0.5
        self.types = layer_types(config)
        self.rope = rope_parameters(config)

    def norm(self, x, weight):  # Gemma2RMSNorm / Gemma3RMSNorm
        out = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return (out * (1.0 + weight.float())).type_as(x)

    def rotary(self, positions, kind):
        theta, factor = self.rope[kind]
        dim = self.head_dim
        inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        inv_freq = inv_freq / factor  # rope_type "linear"
        freqs = (inv_freq[:, None].float() @ positions[None, :].float()).transpose(0, 1)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()

    @staticmethod
    def rotate_half(x):
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    def attention(self, l, h, positions):
        w = lambda name: self.w[f"layers.{l}.self_attn.{name}"]
        T = h.shape[0]
        q = (h @ w("q_proj.weight").T).view(T, self.heads, self.head_dim).transpose(0, 1)
        k = (h @ w("k_proj.weight").T).view(T, self.kv_heads, self.head_dim).transpose(0, 1)
        v = (h @ w("v_proj.weight").T).view(T, self.kv_heads, self.head_dim).transpose(0, 1)
        if self.gemma3:
            q = self.norm(q, w("q_norm.weight"))
            k = self.norm(k, w("k_norm.weight"))
        cos, sin = self.rotary(positions, self.types[l])
        q = q * cos + self.rotate_half(q) * sin
        k = k * cos + self.rotate_half(k) * sin
        group = self.heads // self.kv_heads
        k = k.repeat_interleave(group, dim=0)
        v = v.repeat_interleave(group, dim=0)
        scores = (q @ k.transpose(1, 2)) * self.scaling
        cap = self.config.get("attn_logit_softcapping")
        if cap is not None:
            scores = torch.tanh(scores / cap) * cap
        i = positions[:, None]
        j = positions[None, :]
        allowed = j <= i
        if self.types[l] == "sliding_attention":
            allowed = allowed & (j > i - self.config["sliding_window"])
        scores = scores + torch.where(allowed, 0.0, torch.finfo(scores.dtype).min)
        p = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        out = (p @ v).transpose(0, 1).reshape(T, self.heads * self.head_dim)
        return out @ w("o_proj.weight").T

    def mlp(self, l, x):
        w = lambda name: self.w[f"layers.{l}.mlp.{name}.weight"]
        gate = torch.nn.functional.gelu(x @ w("gate_proj").T, approximate="tanh")
        return (gate * (x @ w("up_proj").T)) @ w("down_proj").T

    def forward(self, tokens):
        embed = self.w["embed_tokens.weight"]
        x = embed[torch.tensor(tokens)]
        x = x * torch.tensor(self.config["hidden_size"] ** 0.5, dtype=embed.dtype)
        positions = torch.arange(len(tokens))
        for l in range(self.config["num_hidden_layers"]):
            n = lambda name: self.w[f"layers.{l}.{name}.weight"]
            residual = x
            h = self.norm(x, n("input_layernorm"))
            h = self.attention(l, h, positions)
            x = residual + self.norm(h, n("post_attention_layernorm"))
            residual = x
            h = self.mlp(l, self.norm(x, n("pre_feedforward_layernorm")))
            x = residual + self.norm(h, n("post_feedforward_layernorm"))
        x = self.norm(x, self.w["norm.weight"])
        logits = x @ (self.lm_head if self.lm_head is not None else embed).T
        cap = self.config.get("final_logit_softcapping")
        if cap is not None:
            logits = torch.tanh(logits / cap) * cap
        return logits.float()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--tokens", required=True, help="comma-separated token ids")
    parser.add_argument("--greedy", type=int, default=8, help="greedy steps after the tokens")
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = Gemma(args.checkpoint)
    tokens = [int(t) for t in args.tokens.split(",")]
    with torch.no_grad():
        logits = model.forward(tokens)
        sequence = list(tokens)
        for _ in range(args.greedy):
            sequence.append(int(model.forward(sequence)[-1].argmax()))
    out = {"tokens": tokens, "logits": [[float(v) for v in row] for row in logits], "greedy": sequence[len(tokens):]}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
