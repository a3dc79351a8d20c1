#include "cli/number_checks.h"
#include "cli/synth_command.h"

#include <iostream>
#include <map>

#include "model/synth.h"

namespace larql::cli {

void add_synth_command(CLI::App& app) {
  auto spec = std::make_shared<SynthSpec>();
  auto out = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("synth", "Write a synthetic (random-weight) Hugging Face checkpoint for speed tests");
  cmd->add_option("--out", *out, "output directory")->required();
  cmd->add_option("--family", spec->family,
                  "llama, gemma2, gemma3, gemma4 (dense; the Gemma text models), gemma4moe (26B-A4B kind), mixtral, qwen3moe, qwen2moe or gpt-oss")
      ->check(CLI::IsMember({"llama", "gemma2", "gemma3", "gemma4", "gemma4moe", "mixtral", "qwen3moe", "qwen2moe", "gpt-oss"}))
      ->capture_default_str();
  cmd->add_option("--hidden", spec->hidden, "hidden size")->capture_default_str()->check(positive());
  cmd->add_option("--layers", spec->layers, "number of layers")->capture_default_str()->check(positive());
  cmd->add_option("--ffn", spec->ffn, "FFN inner size")->capture_default_str()->check(positive());
  cmd->add_option("--heads", spec->heads, "attention heads")->capture_default_str()->check(positive());
  cmd->add_option("--kv-heads", spec->kv_heads, "key/value heads")->capture_default_str()->check(positive());
  cmd->add_option("--head-dim", spec->head_dim, "head size (default: hidden / heads)")->check(positive());
  cmd->add_option("--global-head-dim", spec->global_head_dim, "Gemma 4: head size of full layers (default: 2 x head size)")
      ->check(positive());
  cmd->add_option("--global-kv-heads", spec->global_kv_heads, "Gemma 4: KV heads of full layers (default: kv-heads / 4)")
      ->check(positive());
  cmd->add_option("--sliding-window", spec->sliding_window, "Gemma, gpt-oss: keys a sliding layer sees (default: 4096 / 1024 / 128)")
      ->check(positive());
  cmd->add_option("--attention-softcap", spec->attention_softcap, "Gemma: cap on attention scores, 0 for none (default: 50 / none)")
      ->check(non_negative());
  cmd->add_option("--final-softcap", spec->final_softcap, "Gemma: cap on logits, 0 for none (default: 30 / none / 30)")
      ->check(non_negative());
  cmd->add_option("--vocab", spec->vocab, "vocabulary size (at least 256)")->capture_default_str()->check(positive());
  cmd->add_option("--context", spec->context, "maximum positions")->capture_default_str()->check(positive());
  cmd->add_option("--dtype", spec->dtype, "weight type; mxfp4 (gpt-oss): MXFP4 experts as *_blocks/*_scales, the rest BF16")
      ->transform(CLI::CheckedTransformer(std::map<std::string, DType>{
          {"bf16", DType::bf16}, {"f16", DType::f16}, {"f32", DType::f32}, {"mxfp4", DType::mxfp4}}))
      ->capture_default_str();
  cmd->add_option("--seed", spec->seed, "random seed")->capture_default_str();
  cmd->add_option("--massive-activations", spec->massive_activations,
                  "hidden coordinates whose FFN outputs are scaled x100..x1000, like real models' massive activations")
      ->capture_default_str();
  cmd->add_option("--experts", spec->experts, "mixtral, qwen3moe, qwen2moe, gemma4moe, gpt-oss: experts per layer")->capture_default_str()->check(positive());
  cmd->add_option("--experts-used", spec->experts_used, "mixtral, qwen3moe, qwen2moe, gemma4moe, gpt-oss: experts each position uses (top-k)")
      ->capture_default_str()
      ->check(positive());
  cmd->add_option("--expert-ffn", spec->expert_ffn, "mixtral, qwen3moe, qwen2moe, gemma4moe, gpt-oss: each expert's inner size (default: --ffn)")->check(positive());
  cmd->add_option("--shared-expert-ffn", spec->shared_expert_ffn, "qwen2moe: its shared expert's inner size (default: --ffn)")
      ->check(positive());
  cmd->add_flag("--stacked-experts", spec->stacked_experts,
                "mixtral, qwen3moe, qwen2moe, gemma4moe: store experts stacked (transformers v5's experts.gate_up_proj, experts.down_proj)");
  cmd->add_option("--reachable-experts", spec->reachable_experts,
                  "mixtral, qwen3moe: routers choose among the first N experts only (to measure memory with most experts unread)");
  cmd->add_option("--dense-layers", spec->dense_layers, "qwen3moe, qwen2moe: layers with a dense MLP of --ffn (mlp_only_layers)")->delimiter(',');
  cmd->add_option("--sliding-period", spec->sliding_period,
                  "Gemma: a full-attention layer after every N - 1 sliding ones (default: 2 / 6 / 6)")
      ->check(positive());
  cmd->add_option("--ple", spec->ple_dim, "gemma4: per-layer embeddings of this width (E2B/E4B: 256; default: none)");
  cmd->add_option("--kv-shared", spec->kv_shared, "gemma4: the last N layers read earlier layers' KV caches (E2B: 20, E4B: 18)");
  cmd->add_flag("--double-wide", spec->double_wide, "gemma4: KV-shared layers' FFN twice --ffn wide (E2B's use_double_wide_mlp)");
  cmd->add_flag("--separate-values", spec->separate_values,
                "gemma4: full layers with their own v_proj (attention_k_eq_v false, as E2B/E4B), not values = keys");
  cmd->callback([spec, out] {
    if (auto s = write_synthetic_checkpoint(*out, *spec); !s) {
      std::cerr << "larql synth: " << s.error().message << "\n";
      throw CLI::RuntimeError(1);
    }
    std::cerr << "larql synth: wrote " << *out << "\n";
  });
}

}  // namespace larql::cli
