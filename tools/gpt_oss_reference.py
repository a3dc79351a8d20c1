#!/usr/bin/python3
"""Reference forward pass for GPT-OSS checkpoints, in PyTorch.

Follows transformers' modeling_gpt_oss.py (eager attention) step by step, without
transformers itself (not packaged in Debian): RMSNorm in f32 then × weight; q, k, v with
biases; YaRN RoPE (_compute_yarn_parameters: a ramp between the original and the
interpolated frequencies, cos and sin × 0.1·ln(factor) + 1) on the two halves of each head;
grouped-query attention over the causal window (sliding layers: the last sliding_window
positions) with each head's sink logit as one more softmax column, then dropped; o_proj
with its bias. The MoE block: router logits h @ W^T + b, top-k of them, softmax over those
k; for each expert in ascending id, gate_up = x @ gate_up_proj[e] + bias (gate the even
columns, up the odd), gate = min(gate, limit), up = clamp(up, -limit, limit),
((up + 1) * gate * sigmoid(1.702 * gate)) @ down_proj[e] + bias, times the weight, added into
a zero f32 sum (index_add_). MXFP4 experts (*_blocks, *_scales) are dequantised as
transformers' convert_moe_packed_tensors does (to f32 here).

Usage: gpt_oss_reference.py CHECKPOINT_DIR --tokens 2,5,9,... [--greedy N] > reference.json
(the output of reference_common.main: logits, greedy ids, router_margin). Needs Debian's
python3-torch (scripts/install-train-deps.sh).
"""
import math

import torch

from reference_common import main, read_checkpoint_tensors, read_config

FP4_VALUES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def dequantize_mxfp4(blocks, scales):
    """[E, rows, G, 16] bytes and [E, rows, G] scales -> [E, cols=G*32, rows] floats (the parameter's layout)."""
    lut = torch.tensor(FP4_VALUES, dtype=torch.float32)
    *prefix, groups, size = blocks.shape
    b = blocks.reshape(-1, size).long()
    out = torch.empty(b.shape[0], size * 2)
    out[:, 0::2] = lut[b & 0x0F]
    out[:, 1::2] = lut[b >> 4]
    out = torch.ldexp(out, scales.reshape(-1, 1).int() - 127)
    return out.reshape(*prefix, groups * size * 2).transpose(1, 2).contiguous()


class GptOss:
    def __init__(self, path):
        self.config = config = read_config(path)
        self.w = read_checkpoint_tensors(path)
        for name in [n for n in self.w if n.endswith("_blocks")]:
            stem = name[: -len("_blocks")]
            self.w[stem] = dequantize_mxfp4(self.w.pop(name), self.w.pop(stem + "_scales"))
        self.eps = config["rms_norm_eps"]
        self.heads = config["num_attention_heads"]
        self.kv_heads = config["num_key_value_heads"]
        self.head_dim = config["head_dim"]
        self.top_k = config["num_experts_per_tok"]
        self.experts = config["num_local_experts"]
        self.limit = config.get("swiglu_limit", 7.0)
        self.margin = float("inf")
        self.inv_freq, self.attention_scaling = self.yarn()

    def yarn(self):
        c, s = self.config, self.config["rope_scaling"]
        base, dim, factor = c["rope_theta"], self.head_dim, s["factor"]
        original = s["original_max_position_embeddings"]
        attention_factor = s.get("attention_factor") or (0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0)
        beta_fast, beta_slow = s.get("beta_fast") or 32, s.get("beta_slow") or 1

        def correction_dim(rotations):
            return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(base))

        low, high = correction_dim(beta_fast), correction_dim(beta_slow)
        if s.get("truncate", True):
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        if low == high:
            high += 0.001
        ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
        pos_freqs = base ** (torch.arange(0, dim, 2).float() / dim)
        extrapolation, interpolation = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
        extrapolation_factor = 1 - ramp
        inv_freq = interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor
        return inv_freq, attention_factor

    def norm(self, x, weight):  # GptOssRMSNorm
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return (weight * h).to(x.dtype)

    def rope(self, x, positions):
        freqs = positions[:, None].float() * self.inv_freq[None, :]
        cos, sin = freqs.cos() * self.attention_scaling, freqs.sin() * self.attention_scaling
        first, second = torch.chunk(x, 2, dim=-1)
        return torch.cat((first * cos - second * sin, second * cos + first * sin), dim=-1)

    def attention(self, l, h, positions):
        w = lambda name: self.w[f"model.layers.{l}.self_attn.{name}"]
        T, hd = h.shape[0], self.head_dim
        q = (h @ w("q_proj.weight").T + w("q_proj.bias")).view(T, self.heads, hd).transpose(0, 1)
        k = (h @ w("k_proj.weight").T + w("k_proj.bias")).view(T, self.kv_heads, hd).transpose(0, 1)
        v = (h @ w("v_proj.weight").T + w("v_proj.bias")).view(T, self.kv_heads, hd).transpose(0, 1)
        q, k = self.rope(q, positions), self.rope(k, positions)
        group = self.heads // self.kv_heads
        k = k.repeat_interleave(group, dim=0)
        v = v.repeat_interleave(group, dim=0)
        scores = (q @ k.transpose(1, 2)) * hd ** -0.5
        allowed = positions[None, :] <= positions[:, None]
        if self.config["layer_types"][l] == "sliding_attention":
            allowed = allowed & (positions[None, :] > positions[:, None] - self.config["sliding_window"])
        scores = scores + torch.where(allowed, 0.0, torch.finfo(scores.dtype).min)
        sinks = w("sinks").reshape(-1, 1, 1).expand(-1, T, 1)
        combined = torch.cat([scores, sinks], dim=-1)
        combined = combined - combined.max(dim=-1, keepdim=True).values
        p = torch.softmax(combined, dim=-1)[..., :-1]
        out = (p @ v).transpose(0, 1).reshape(T, self.heads * hd)
        return out @ w("o_proj.weight").T + w("o_proj.bias")

    def moe(self, l, h):
        w = lambda name: self.w[f"model.layers.{l}.mlp.{name}"]
        logits = h @ w("router.weight").T + w("router.bias")
        ranked = logits.float().sort(dim=-1, descending=True).values
        self.margin = min(self.margin, float((ranked[:, self.top_k - 1] - ranked[:, self.top_k]).min()))
        top, selected = torch.topk(logits, self.top_k, dim=-1)
        weights = torch.softmax(top, dim=1)
        out = torch.zeros_like(h)
        for e in range(self.experts):
            rows, slot = torch.where(selected == e)
            if rows.numel() == 0:
                continue
            x = h[rows]
            gate_up = x @ w("experts.gate_up_proj")[e] + w("experts.gate_up_proj_bias")[e]
            gate, up = gate_up[..., ::2], gate_up[..., 1::2]
            gate = gate.clamp(min=None, max=self.limit)
            up = up.clamp(min=-self.limit, max=self.limit)
            glu = gate * torch.sigmoid(gate * 1.702)
            y = ((up + 1) * glu) @ w("experts.down_proj")[e] + w("experts.down_proj_bias")[e]
            out.index_add_(0, rows, y * weights[rows, slot, None])
        return out

    def forward(self, tokens):
        self.w = {k: (v.float() if v.is_floating_point() else v) for k, v in self.w.items()}
        x = self.w["model.embed_tokens.weight"][torch.tensor(tokens)]
        positions = torch.arange(len(tokens))
        for l in range(self.config["num_hidden_layers"]):
            n = lambda name: self.w[f"model.layers.{l}.{name}.weight"]
            x = x + self.attention(l, self.norm(x, n("input_layernorm")), positions)
            x = x + self.moe(l, self.norm(x, n("post_attention_layernorm")))
        x = self.norm(x, self.w["model.norm.weight"])
        return (x @ self.w["lm_head.weight"].T).float()


if __name__ == "__main__":
    main(__doc__.splitlines()[0], GptOss)
