// `larql synth`: a Hugging Face-format checkpoint with random weights of realistic shape,
// for speed tests and benchmarks at sizes no trained model here has. Not for accuracy.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/errors.h"
#include "kernels/dtype.h"

namespace larql {

struct SynthSpec {
  // llama, gemma2, gemma3, gemma4 (their text models), mixtral, qwen3moe or qwen2moe (attention
  // biases, a shared expert beside the routed ones): the config.json written, the
  // tensors, and for Gemma its sandwich norms (Gemma 2/3 store w − 1), tied classifier,
  // interleaved sliding and full layers and softcaps; Gemma 4's full layers with larger
  // heads, fewer KV heads, values = keys and proportional RoPE, and its layer scalars.
  // gpt-oss: attention sinks and biases, alternating sliding (128) and full layers, YaRN
  // RoPE, a router with a bias and top-k softmax, experts with biases and the clamped SwiGLU,
  // stored as transformers stores them (gate_up_proj [E][H][2·I] interleaved, or with dtype
  // mxfp4 as *_blocks/*_scales and a quantization_config, the rest BF16).
  std::string family = "llama";
  size_t hidden = 256;
  size_t layers = 2;
  size_t ffn = 688;
  size_t heads = 4;
  size_t kv_heads = 4;
  size_t head_dim = 0;  // 0: hidden / heads
  size_t global_head_dim = 0;  // Gemma 4's full layers; 0: 2 × head_dim
  size_t global_kv_heads = 0;  // Gemma 4's full layers; 0: kv_heads / 4 (at least 1)
  // Gemma: keys a sliding layer sees; 0: the family's (4096 for Gemma 2, 1024 for Gemma 3)
  size_t sliding_window = 0;
  // Gemma: soft caps on attention scores and on logits; unset: the family's (Gemma 2:
  // 50 and 30; Gemma 3: none; Gemma 4: none and 30). 0 writes none.
  std::optional<float> attention_softcap = {}, final_softcap = {};
  size_t vocab = 512;
  size_t context = 2048;
  DType dtype = DType::bf16;  // f32, f16, bf16; mxfp4 for gpt-oss's experts
  uint64_t seed = 0;
  // How many hidden coordinates every FFN output carries far above the rest (their rows
  // of down_proj scaled ×100, ×300, ×600, ×1000, repeating), as real models' "massive
  // activations" do; 0 for none. For wire-format accuracy tests.
  size_t massive_activations = 0;
  // mixtral and qwen3moe: experts per layer, how many each position uses, their width
  // (0: ffn), and whether they are stored stacked (transformers v5's experts.gate_up_proj
  // [E][2·I][H] and experts.down_proj) instead of one tensor per expert and projection.
  size_t experts = 8;
  size_t experts_used = 2;
  size_t expert_ffn = 0;
  size_t shared_expert_ffn = 0;  // qwen2moe: its shared expert's width (0: ffn)
  bool stacked_experts = false;
  std::vector<size_t> dense_layers = {};  // qwen3moe, qwen2moe: layers with a dense MLP of --ffn instead (mlp_only_layers)
  // mixtral and qwen3moe: routers that choose among the first N experts only (0: all), so
  // that memory can be measured with most experts never read. Hidden coordinate 0 then
  // carries a constant (the embedding's column 0 is √hidden and no layer writes to it), and
  // each router's column 0 is +4 for the first N experts and −4 for the rest: far more than
  // the other coordinates' sum can move a logit.
  size_t reachable_experts = 0;
  // Gemma 4's E models: per-layer embeddings of this width (0: none), the last layers that
  // read earlier layers' KV caches, and their FFN twice as wide (E2B's use_double_wide_mlp).
  size_t ple_dim = 0;
  size_t kv_shared = 0;
  bool double_wide = false;
  bool separate_values = false;  // Gemma 4: full layers with a v_proj (the E models'), not values = keys
  // Gemma: a full layer after every period − 1 sliding ones; 0: the family's (2, 6, 6).
  // Gemma 4's last layer is full whatever the period.
  size_t sliding_period = 0;
};

// The hidden coordinates `write_synthetic_checkpoint` makes massive, and their factors.
std::vector<std::pair<size_t, float>> massive_coordinates(const SynthSpec& spec);

// Writes config.json, generation_config.json, model.safetensors and a tokenizer.json of
// 256 byte tokens, the rest unused (byte-level BPE; Gemma 4's SentencePiece-style with byte
// fallback, as its GGUF files need) into `dir`. Gemma 3's layout is the
// 4B–27B one: a full layer after every five sliding ones, linear RoPE scaling ×8 on full
// layers only.
Status write_synthetic_checkpoint(const std::string& dir, const SynthSpec& spec);

}  // namespace larql
