"""Writes a Hugging Face model directory: config.json, generation_config.json,
model.safetensors (bf16) and tokenizer.json."""
import json
import os
import struct

import torch

from . import bpe, llama


def save_safetensors(tensors, path):
    """The safetensors layout: u64 header size, JSON header, raw little-endian data."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        data = t.detach().contiguous().to(torch.bfloat16).view(torch.int16).numpy().tobytes()
        header[name] = {"dtype": "BF16", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for b in blobs:
            f.write(b)


def load_safetensors(path):
    """The tensors of a bf16 safetensors file, as f32."""
    with open(path, "rb") as f:
        raw = f.read()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + size])
    base = 8 + size
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "BF16":
            raise ValueError(f"{path}: {name} is {info['dtype']}, expected BF16")
        begin, end = info["data_offsets"]
        data = torch.frombuffer(bytearray(raw[base + begin:base + end]), dtype=torch.int16)
        tensors[name] = data.view(torch.bfloat16).float().reshape(info["shape"])
    return tensors


def load_model_dir(out_dir):
    """The model and tokenizer save_model_dir wrote, back in PyTorch (f32 compute)."""
    with open(os.path.join(out_dir, "config.json")) as f:
        c = json.load(f)
    cfg = llama.Config(vocab_size=c["vocab_size"], hidden_size=c["hidden_size"],
                       intermediate_size=c["intermediate_size"], num_hidden_layers=c["num_hidden_layers"],
                       num_attention_heads=c["num_attention_heads"], num_key_value_heads=c["num_key_value_heads"],
                       max_position_embeddings=c["max_position_embeddings"], rms_norm_eps=c["rms_norm_eps"],
                       rope_theta=c["rope_theta"], num_local_experts=c.get("num_local_experts", 0),
                       num_experts_per_tok=c.get("num_experts_per_tok", 2))
    model = llama.Llama(cfg)
    model.load_state_dict(load_safetensors(os.path.join(out_dir, "model.safetensors")))
    model.eval()
    return model, bpe.load(os.path.join(out_dir, "tokenizer.json"))


def save_model_dir(model, tokenizer, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    cfg = model.cfg
    bos, eos = tokenizer.vocab[bpe.BOS], tokenizer.vocab[bpe.EOS]
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size,
        "num_hidden_layers": cfg.num_hidden_layers,
        "num_attention_heads": cfg.num_attention_heads,
        "num_key_value_heads": cfg.num_key_value_heads,
        "head_dim": cfg.head_dim,
        "max_position_embeddings": cfg.max_position_embeddings,
        "rms_norm_eps": cfg.rms_norm_eps,
        "rope_theta": cfg.rope_theta,
        "hidden_act": "silu",
        "tie_word_embeddings": True,
        "attention_bias": False,
        "bos_token_id": bos,
        "eos_token_id": eos,
        "torch_dtype": "bfloat16",
    }
    if cfg.num_local_experts:  # transformers' Mixtral: the FFNs are mixtures of experts
        config.update({"architectures": ["MixtralForCausalLM"], "model_type": "mixtral",
                       "num_local_experts": cfg.num_local_experts, "num_experts_per_tok": cfg.num_experts_per_tok})
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": bos, "eos_token_id": eos, "do_sample": False}, f, indent=2)
    save_safetensors(dict(model.named_parameters()), os.path.join(out_dir, "model.safetensors"))
    bpe.save(tokenizer, os.path.join(out_dir, "tokenizer.json"))
