#!/usr/bin/python3
"""Reference forward pass for mixture-of-experts checkpoints (Mixtral, Qwen3-MoE, Qwen2-MoE), in PyTorch.

Follows transformers' modeling_mixtral.py, modeling_qwen3_moe.py and modeling_qwen2_moe.py
(eager attention) step by step, without transformers itself (not packaged in Debian):
RMSNorm in f32 then x weight, rotate-half RoPE, Qwen3's RMSNorm on each head of q and k
before RoPE, Qwen2's biases on q, k and v, grouped-query attention, and the sparse MoE
block: router logits h @ gate^T, softmax over all experts in f32, top-k, divided by their
sum (Mixtral; Qwen3-MoE and Qwen2-MoE when norm_topk_prob), then for each expert in
ascending id: expert(h) * weight added into a zero f32 sum (index_add_); Qwen2-MoE then
adds sigmoid(h @ shared_expert_gate^T) * shared_expert(h). Experts
are read per expert (experts.N.{w1,w3,w2} / {gate,up,down}_proj) or stacked
(transformers v5's experts.gate_up_proj [E, 2I, H], gate rows first, and experts.down_proj;
v5 also renamed Mixtral's block_sparse_moe to mlp).
Qwen3-MoE layers in mlp_only_layers, or off decoder_sparse_step, are dense MLPs.

Usage: moe_reference.py CHECKPOINT_DIR --tokens 2,5,9,... [--greedy N] > reference.json
Writes {"tokens", "logits": [position][vocab], "greedy": [ids], "router_margin"}: greedy
continues N steps recomputing the whole sequence (no cache); router_margin is the smallest
gap between the k-th and (k+1)-th router logit over every layer and position the logits
and greedy steps saw (top-k is discontinuous: a fixture is only meaningful when it is not
tiny). Needs Debian's python3-torch (scripts/install-train-deps.sh).
"""

import torch

from reference_common import main, read_checkpoint_tensors, read_config, rotate_half

class MoeModel:
    def __init__(self, path):
        self.config = config = read_config(path)
        self.w = read_checkpoint_tensors(path)
        self.mixtral = config["model_type"] == "mixtral"
        self.qwen2 = config["model_type"] == "qwen2_moe"  # q/k/v biases, no QK-norm, a shared expert
        # transformers v5 saves Mixtral's block_sparse_moe as mlp (its router mlp.gate).
        legacy = self.mixtral and "model.layers.0.block_sparse_moe.gate.weight" in self.w
        self.module = "block_sparse_moe" if legacy else "mlp"
        self.projections = ("w1", "w3", "w2") if self.mixtral else ("gate_proj", "up_proj", "down_proj")
        self.experts = config["num_local_experts"] if self.mixtral else config["num_experts"]
        self.top_k = config["num_experts_per_tok"]
        self.renormalise = True if self.mixtral else config.get("norm_topk_prob", False)
        self.eps = config["rms_norm_eps"]
        self.heads = config["num_attention_heads"]
        self.kv_heads = config.get("num_key_value_heads", self.heads)
        self.head_dim = config.get("head_dim") or config["hidden_size"] // self.heads
        self.margin = float("inf")

    def sparse(self, l):
        if self.mixtral:
            return True
        step = self.config.get("decoder_sparse_step", 1)
        return l not in self.config.get("mlp_only_layers", []) and self.experts > 0 and (l + 1) % step == 0

    def norm(self, x, weight):  # LlamaRMSNorm / MixtralRMSNorm / Qwen3MoeRMSNorm
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return weight * h.to(x.dtype)

    def rotary(self, positions):
        theta = self.config.get("rope_theta", 10000.0)
        dim = self.head_dim
        inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        freqs = (inv_freq[:, None].float() @ positions[None, :].float()).transpose(0, 1)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()

    def attention(self, l, h, positions):
        w = lambda name: self.w[f"model.layers.{l}.self_attn.{name}"]
        T, hd = h.shape[0], self.head_dim
        project = lambda name: h @ w(name + ".weight").T + (w(name + ".bias") if self.qwen2 else 0)
        q = project("q_proj").view(T, self.heads, hd).transpose(0, 1)
        k = project("k_proj").view(T, self.kv_heads, hd).transpose(0, 1)
        v = project("v_proj").view(T, self.kv_heads, hd).transpose(0, 1)
        if not self.mixtral and not self.qwen2:  # Qwen3: q_norm and k_norm on each head, before RoPE
            q = self.norm(q, w("q_norm.weight"))
            k = self.norm(k, w("k_norm.weight"))
        cos, sin = self.rotary(positions)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        group = self.heads // self.kv_heads
        k = k.repeat_interleave(group, dim=0)
        v = v.repeat_interleave(group, dim=0)
        scores = (q @ k.transpose(1, 2)) * hd ** -0.5
        allowed = positions[None, :] <= positions[:, None]
        scores = scores + torch.where(allowed, 0.0, torch.finfo(scores.dtype).min)
        p = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        out = (p @ v).transpose(0, 1).reshape(T, self.heads * hd)
        return out @ w("o_proj.weight").T

    def expert_weights(self, l, e):
        base = f"model.layers.{l}.{self.module}.experts."
        stacked = base + "gate_up_proj"
        if stacked in self.w:
            inner = self.w[stacked].shape[1] // 2
            gate_up = self.w[stacked][e]
            return gate_up[:inner], gate_up[inner:], self.w[base + "down_proj"][e]
        return tuple(self.w[f"{base}{e}.{p}.weight"] for p in self.projections)

    def moe(self, l, h):
        router_logits = h @ self.w[f"model.layers.{l}.{self.module}.gate.weight"].T
        ranked = router_logits.float().sort(dim=-1, descending=True).values
        self.margin = min(self.margin, float((ranked[:, self.top_k - 1] - ranked[:, self.top_k]).min()))
        routing_weights = torch.softmax(router_logits, dim=1, dtype=torch.float)
        routing_weights, selected = torch.topk(routing_weights, self.top_k, dim=-1)
        if self.renormalise:
            routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
        routing_weights = routing_weights.to(h.dtype)
        out = torch.zeros_like(h)
        for e in range(self.experts):
            rows, slot = torch.where(selected == e)
            if rows.numel() == 0:
                continue
            gate, up, down = self.expert_weights(l, e)
            x = h[rows]
            y = (torch.nn.functional.silu(x @ gate.T) * (x @ up.T)) @ down.T
            out.index_add_(0, rows, y * routing_weights[rows, slot, None])
        if self.qwen2:
            shared = self.gated_mlp(f"model.layers.{l}.mlp.shared_expert.", h)
            out = out + torch.sigmoid(h @ self.w[f"model.layers.{l}.mlp.shared_expert_gate.weight"].T) * shared
        return out

    def gated_mlp(self, prefix, h):  # prefix: "model.layers.{l}.mlp." (a dense layer) or its "shared_expert."
        w = lambda name: self.w[f"{prefix}{name}.weight"]
        return (torch.nn.functional.silu(h @ w("gate_proj").T) * (h @ w("up_proj").T)) @ w("down_proj").T

    def forward(self, tokens):
        x = self.w["model.embed_tokens.weight"][torch.tensor(tokens)]
        positions = torch.arange(len(tokens))
        for l in range(self.config["num_hidden_layers"]):
            n = lambda name: self.w[f"model.layers.{l}.{name}.weight"]
            x = x + self.attention(l, self.norm(x, n("input_layernorm")), positions)
            h = self.norm(x, n("post_attention_layernorm"))
            x = x + (self.moe(l, h) if self.sparse(l) else self.gated_mlp(f"model.layers.{l}.mlp.", h))
        x = self.norm(x, self.w["model.norm.weight"])
        head = self.w.get("lm_head.weight", self.w["model.embed_tokens.weight"])
        return (x @ head.T).float()


if __name__ == "__main__":
    main(__doc__.splitlines()[0], MoeModel)
