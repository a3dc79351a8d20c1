#!/usr/bin/python3
"""Reference forward pass for Gemma 2, Gemma 3 and Gemma 4 (dense text) checkpoints, in PyTorch.

Follows transformers' modeling_gemma2.py, modeling_gemma3.py and modeling_gemma4.py (eager
attention) step by step, without transformers itself (not packaged in Debian): RMSNorm in
f32 with (1 + w) for Gemma 2/3 and w for Gemma 4, embeddings x sqrt(hidden) rounded to the
embedding's dtype, the norm sandwich, q/k norms (Gemma 3/4), rotate-half RoPE with each
layer type's base and scaling (Gemma 4's full layers: proportional), attention-score softcap
before the mask (Gemma 2), sliding windows that count the query's own position, GeGLU with
gelu(approximate="tanh"), the tied classifier and the final-logit softcap. Gemma 4 also:
full layers with their own head size and KV heads, values that are the raw keys
(attention_k_eq_v), v_norm without weight, scores unscaled, layer_scalar on each layer; and
with enable_moe_block (the 26B-A4B kind) the routed experts beside the dense MLP: the
router reads the residual through a norm without weight x router.scale x hidden^-0.5,
softmax over all experts, top-k renormalised then x per_expert_scale; the experts
(experts.gate_up_proj [E, 2I, H], gate rows first; experts.down_proj) take
pre_feedforward_layernorm_2(residual), each added in ascending expert id into a zero sum
(index_add_); post_feedforward_layernorm_1(mlp) + post_feedforward_layernorm_2(experts)
then goes through post_feedforward_layernorm. Gemma 4's E models (E2B, E4B) also: per-layer
embeddings (Gemma4TextModel.get_per_layer_inputs and project_per_layer_inputs: the table row
x sqrt(d) rounded to its dtype, plus the scaled embedding's projection x hidden^-0.5 normed
per layer, the sum x 2^-0.5; in each layer after the FFN's residual add, per_layer_input_gate,
gelu_tanh, x that input, per_layer_projection, post_per_layer_input_norm, added), the last
num_kv_shared_layers layers attending over the keys and values of the last earlier layer of
their type (Gemma4TextAttention's store_full_length_kv and shared_kv_states), and
use_double_wide_mlp's FFN twice as wide on those layers (checked against the weights).

Usage: gemma_reference.py CHECKPOINT_DIR --tokens 2,5,9,... [--greedy N] > reference.json
Writes {"tokens", "logits": [position][vocab], "greedy": [ids]}; greedy continues the
tokens N steps, recomputing the whole sequence each step (no cache, nothing shared with
larql's KV-cache code). Needs Debian's python3-torch (scripts/install-train-deps.sh).
"""
import json
import math
import os

import torch

from reference_common import main, read_checkpoint_tensors, read_config, rotate_half

def text_config(path):
    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    if "text_config" in config:  # Gemma3ForConditionalGeneration, Gemma4ForConditionalGeneration
        config = dict(config["text_config"], model_type=config["text_config"].get("model_type", config["model_type"] + "_text"))
    return config


def layer_types(config):
    n = config["num_hidden_layers"]
    if "layer_types" in config:
        return config["layer_types"]
    # Gemma2Config: sliding when (i + 1) % 2; Gemma3TextConfig: when (i + 1) % sliding_window_pattern
    period = 2 if config["model_type"] == "gemma2" else config.get("sliding_window_pattern", 6)
    return ["sliding_attention" if (i + 1) % period else "full_attention" for i in range(n)]


def rope_parameters(config):
    """(theta, linear factor, proportional fraction or None) per layer type, from either
    spelling of the config."""
    if "rope_parameters" in config and "full_attention" in config["rope_parameters"]:
        out = {}
        for kind, p in config["rope_parameters"].items():
            kind_of = p.get("rope_type", "default")
            factor = p.get("factor", 1.0) if kind_of in ("linear", "proportional") else 1.0
            out[kind] = (p["rope_theta"], factor, p.get("partial_rotary_factor", 1.0) if kind_of == "proportional" else None)
        return out
    scaling = config.get("rope_scaling") or {}
    factor = scaling.get("factor", 1.0) if scaling.get("rope_type", scaling.get("type")) == "linear" else 1.0
    full = (config.get("rope_theta", 10000.0), factor, None)
    if config["model_type"] == "gemma2":
        return {"full_attention": full, "sliding_attention": full}
    # Gemma3RotaryEmbedding for local layers is built with rope_type "default"
    return {"full_attention": full, "sliding_attention": (config.get("rope_local_base_freq", 10000.0), 1.0, None)}


class Gemma:
    def __init__(self, path):
        self.config = config = text_config(path)
        tensors = read_checkpoint_tensors(path)
        prefix = next(p for p in ("model.", "language_model.model.", "model.language_model.")
                      if p + "embed_tokens.weight" in tensors)
        self.w = {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}
        self.lm_head = tensors.get("lm_head.weight", tensors.get("language_model.lm_head.weight"))
        self.gemma3 = config["model_type"] != "gemma2"  # q/k norms
        self.gemma4 = config["model_type"] == "gemma4_text"
        self.eps = config.get("rms_norm_eps", 1e-6)
        self.heads = config["num_attention_heads"]
        self.types = layer_types(config)
        self.rope = rope_parameters(config)
        # Gemma4TextAttention.__init__: scaling 1.0; full layers take global_head_dim, and
        # with attention_k_eq_v the global KV heads and no v_proj
        self.scaling = 1.0 if self.gemma4 else config["query_pre_attn_scalar"] ** -0.5
        L = config["num_hidden_layers"]
        self.first_shared = L - (config.get("num_kv_shared_layers") or 0)
        prev = self.types[:self.first_shared]
        # store_full_length_kv: the last layer of each type before the shared ones
        self.stores_kv = {l for l in range(self.first_shared) if l == len(prev) - 1 - prev[::-1].index(self.types[l])}
        self.ple_dim = config.get("hidden_size_per_layer_input") or 0
        if config.get("use_double_wide_mlp"):  # Gemma4TextMLP: first_kv_shared_layer_idx > 0
            for l in range(self.first_shared, L):
                assert self.w[f"layers.{l}.mlp.gate_proj.weight"].shape[0] == 2 * config["intermediate_size"], l

    def head_dim(self, l):
        if self.gemma4 and self.types[l] == "full_attention" and self.config.get("global_head_dim"):
            return self.config["global_head_dim"]
        return self.config["head_dim"]

    def k_eq_v(self, l):
        return self.gemma4 and self.types[l] == "full_attention" and self.config.get("attention_k_eq_v", False)

    def kv_heads(self, l):
        return self.config["num_global_key_value_heads"] if self.k_eq_v(l) else self.config["num_key_value_heads"]

    def norm(self, x, weight):
        if self.gemma4:  # Gemma4RMSNorm: x * pow(mean(x^2) + eps, -0.5) * w (no +1; no weight: v_norm)
            out = x.float() * torch.pow(x.float().pow(2).mean(-1, keepdim=True) + self.eps, -0.5)
            return (out if weight is None else out * weight.float()).type_as(x)
        # Gemma2RMSNorm / Gemma3RMSNorm
        out = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return (out * (1.0 + weight.float())).type_as(x)

    def rotary(self, positions, kind, dim):
        theta, factor, proportional = self.rope[kind]
        if proportional is None:
            inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        else:  # _compute_proportional_rope_parameters: the head's full size in the exponent
            rope_angles = int(proportional * dim // 2)
            inv_freq = 1.0 / (theta ** (torch.arange(0, 2 * rope_angles, 2, dtype=torch.int64).float() / dim))
            inv_freq = torch.cat((inv_freq, torch.zeros(dim // 2 - rope_angles, dtype=torch.float32)))
        inv_freq = inv_freq / factor  # rope_type "linear" (and proportional's factor)
        freqs = (inv_freq[:, None].float() @ positions[None, :].float()).transpose(0, 1)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()

    def attention(self, l, h, positions):
        w = lambda name: self.w[f"layers.{l}.self_attn.{name}"]
        T = h.shape[0]
        hd, kvh = self.head_dim(l), self.kv_heads(l)
        q = (h @ w("q_proj.weight").T).view(T, self.heads, hd).transpose(0, 1)
        cos, sin = self.rotary(positions, self.types[l], hd)
        if self.gemma3:
            q = self.norm(q, w("q_norm.weight"))
        q = q * cos + rotate_half(q) * sin
        if l >= self.first_shared:  # KV-shared: an earlier layer's keys and values
            k, v = self.shared_kv[self.types[l]]
        else:
            k = (h @ w("k_proj.weight").T).view(T, kvh, hd).transpose(0, 1)
            # Gemma 4 K=V layers: the values are the raw key projection, before k_norm
            v = k if self.k_eq_v(l) else (h @ w("v_proj.weight").T).view(T, kvh, hd).transpose(0, 1)
            if self.gemma3:
                k = self.norm(k, w("k_norm.weight"))
            if self.gemma4:
                v = self.norm(v, None)
            k = k * cos + rotate_half(k) * sin
            if l in self.stores_kv:
                self.shared_kv[self.types[l]] = (k, v)
        group = self.heads // kvh
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
        out = (p @ v).transpose(0, 1).reshape(T, self.heads * hd)
        return out @ w("o_proj.weight").T

    def mlp(self, l, x):
        w = lambda name: self.w[f"layers.{l}.mlp.{name}.weight"]
        gate = torch.nn.functional.gelu(x @ w("gate_proj").T, approximate="tanh")
        return (gate * (x @ w("up_proj").T)) @ w("down_proj").T

    def experts(self, l, residual):
        """Gemma4TextRouter and Gemma4TextExperts (MixtralExperts with gelu_tanh)."""
        w = lambda name: self.w[f"layers.{l}.{name}"]
        hidden = self.config["hidden_size"]
        r = self.norm(residual, None) * w("router.scale") * hidden ** -0.5
        probs = torch.softmax(r @ w("router.proj.weight").T, dim=-1)
        top_w, top_i = torch.topk(probs, k=self.config["top_k_experts"], dim=-1)
        ranked = (r @ w("router.proj.weight").T).sort(dim=-1, descending=True).values
        k = self.config["top_k_experts"]
        self.margin = min(getattr(self, "margin", float("inf")), float((ranked[:, k - 1] - ranked[:, k]).min()))
        top_w = top_w / top_w.sum(dim=-1, keepdim=True)
        top_w = top_w * w("router.per_expert_scale")[top_i]
        x = self.norm(residual, w("pre_feedforward_layernorm_2.weight"))
        out = torch.zeros_like(x)
        inner = self.config["moe_intermediate_size"]
        for e in range(self.config["num_experts"]):
            rows, slot = torch.where(top_i == e)
            if rows.numel() == 0:
                continue
            gate_up = w("experts.gate_up_proj")[e]
            h = x[rows]
            y = torch.nn.functional.gelu(h @ gate_up[:inner].T, approximate="tanh") * (h @ gate_up[inner:].T)
            y = y @ w("experts.down_proj")[e].T
            out.index_add_(0, rows, y * top_w[rows, slot, None])
        return out

    def per_layer_inputs(self, tokens, x):
        """[T, L, d]: the table's rows x sqrt(d), plus the scaled embedding's projection."""
        table = self.w["embed_tokens_per_layer.weight"]
        T, L, d = len(tokens), self.config["num_hidden_layers"], self.ple_dim
        token_part = (table[torch.tensor(tokens)] * torch.tensor(d ** 0.5, dtype=table.dtype)).view(T, L, d)
        proj = (x @ self.w["per_layer_model_projection.weight"].T) * self.config["hidden_size"] ** -0.5
        proj = self.norm(proj.view(T, L, d), self.w["per_layer_projection_norm.weight"])
        return (proj + token_part) * 2.0 ** -0.5

    def per_layer_embedding(self, l, x, ple):
        w = lambda name: self.w[f"layers.{l}.{name}.weight"]
        h = torch.nn.functional.gelu(x @ w("per_layer_input_gate").T, approximate="tanh") * ple[:, l, :]
        return x + self.norm(h @ w("per_layer_projection").T, w("post_per_layer_input_norm"))

    def forward(self, tokens):
        embed = self.w["embed_tokens.weight"]
        x = embed[torch.tensor(tokens)]
        x = x * torch.tensor(self.config["hidden_size"] ** 0.5, dtype=embed.dtype)
        positions = torch.arange(len(tokens))
        self.shared_kv = {}
        ple = self.per_layer_inputs(tokens, x) if self.ple_dim else None
        for l in range(self.config["num_hidden_layers"]):
            n = lambda name: self.w[f"layers.{l}.{name}.weight"]
            residual = x
            h = self.norm(x, n("input_layernorm"))
            h = self.attention(l, h, positions)
            x = residual + self.norm(h, n("post_attention_layernorm"))
            residual = x
            h = self.mlp(l, self.norm(x, n("pre_feedforward_layernorm")))
            if self.config.get("enable_moe_block"):
                h = self.norm(h, n("post_feedforward_layernorm_1")) + \
                    self.norm(self.experts(l, residual), n("post_feedforward_layernorm_2"))
            x = residual + self.norm(h, n("post_feedforward_layernorm"))
            if ple is not None:
                x = self.per_layer_embedding(l, x, ple)
            if self.gemma4:
                x = x * self.w[f"layers.{l}.layer_scalar"]
        x = self.norm(x, self.w["norm.weight"])
        logits = x @ (self.lm_head if self.lm_head is not None else embed).T
        cap = self.config.get("final_logit_softcapping")
        if cap is not None:
            logits = torch.tanh(logits / cap) * cap
        return logits.float()


if __name__ == "__main__":
    main(__doc__.splitlines()[0], Gemma)
