#include "model/expert_tensors.h"

#include "model/gpt_oss_experts.h"

namespace larql {
namespace {

std::string_view hf_projection(const MoeNames& n, ExpertRole role) {
  return role == ExpertRole::gate ? n.hf_gate : role == ExpertRole::up ? n.hf_up : n.hf_down;
}

const char* gguf_role(ExpertRole role) { return role == ExpertRole::gate ? "gate" : role == ExpertRole::up ? "up" : "down"; }

std::string hf_layer(size_t layer) { return "model.layers." + std::to_string(layer) + "."; }

std::string blk(size_t layer) { return "blk." + std::to_string(layer) + "."; }

// `count` matrices of [rows][cols] one after another in t's data.
std::vector<Matrix> slices(const FoundTensor& t, size_t count, size_t rows, size_t cols) {
  std::vector<Matrix> out;
  const size_t bytes = rows * dtype_bytes(*t.dtype, cols);
  for (size_t i = 0; i < count; ++i) out.push_back({*t.dtype, rows, cols, static_cast<const uint8_t*>(t.data) + i * bytes});
  return out;
}

}  // namespace

std::string hf_router_name(const MoeNames& n, size_t layer) { return hf_layer(layer) + std::string(n.hf_router); }
std::string hf_expert_name(const MoeNames& n, size_t layer, size_t expert, ExpertRole role) {
  return hf_layer(layer) + std::string(n.hf_experts) + std::to_string(expert) + "." + std::string(hf_projection(n, role)) + ".weight";
}
std::string hf_stacked_gate_up_name(const MoeNames& n, size_t layer) { return hf_layer(layer) + std::string(n.hf_experts) + "gate_up_proj"; }
std::string hf_stacked_down_name(const MoeNames& n, size_t layer) { return hf_layer(layer) + std::string(n.hf_experts) + "down_proj"; }

std::string hf_router_bias_name(const MoeNames& n, size_t layer) {
  return n.hf_router_bias.empty() ? std::string() : hf_layer(layer) + std::string(n.hf_router_bias);
}

std::string hf_shared_expert_name(const MoeNames& n, size_t layer, ExpertRole role) {
  return hf_layer(layer) + std::string(n.hf_shared_expert) + std::string(hf_projection(n, role)) + ".weight";
}

std::string gguf_router_name(size_t layer) { return blk(layer) + "ffn_gate_inp.weight"; }
std::string gguf_router_bias_name(size_t layer) { return blk(layer) + "ffn_gate_inp.bias"; }
std::string gguf_stacked_bias_name(size_t layer, ExpertRole role) { return blk(layer) + "ffn_" + gguf_role(role) + "_exps.bias"; }
std::string gguf_stacked_name(size_t layer, ExpertRole role) { return blk(layer) + "ffn_" + gguf_role(role) + "_exps.weight"; }
std::string gguf_stacked_gate_up_name(size_t layer) { return blk(layer) + "ffn_gate_up_exps.weight"; }
std::string gguf_shared_expert_name(size_t layer, ExpertRole role) { return blk(layer) + "ffn_" + gguf_role(role) + "_shexp.weight"; }
std::string gguf_expert_name(size_t layer, size_t expert, ExpertRole role) {
  return blk(layer) + "ffn_" + gguf_role(role) + "." + std::to_string(expert) + ".weight";
}

Status assemble_experts(Model& m, CheckpointFormat format, const MoeNames* names, const std::string& source,
                        const std::function<std::optional<FoundTensor>(const std::string& name)>& find) {
  const ModelConfig& c = m.config;
  const size_t E = c.moe.experts, I = c.moe.expert_ffn, H = c.hidden;
  const bool hf = format == CheckpointFormat::hf;
  if (hf && !names) return make_error(ErrorCode::invalid_argument, source + ": family '" + c.family + "' has no mixture-of-experts names");
  // The tensor `name` of `shape`, checked; nullopt when absent.
  auto take = [&](const std::string& name, const std::vector<size_t>& shape) -> Result<std::optional<FoundTensor>> {
    auto found = find(name);
    if (!found) return std::optional<FoundTensor>();
    if (auto s = check_found_tensor(*found, name, shape); !s) return s.error();
    return found;
  };
  // An expert's gate, up and down ([width][H], [H][width]) from the 2-D tensors `name_of`
  // names; `missing(name)` is the error where one is absent.
  auto take_projections = [&](ExpertWeights& ex, size_t width, const std::function<std::string(ExpertRole)>& name_of,
                              const std::function<std::string(const std::string&)>& missing) -> Status {
    for (ExpertRole role : {ExpertRole::gate, ExpertRole::up, ExpertRole::down}) {
      const std::string name = name_of(role);
      const bool is_down = role == ExpertRole::down;
      const size_t rows = is_down ? H : width, cols = is_down ? width : H;
      auto t = take(name, {rows, cols});
      if (!t) return t.error();
      if (!*t) return make_error(ErrorCode::invalid_argument, missing(name));
      ex.*expert_matrix(role) = Matrix{*(*t)->dtype, rows, cols, (*t)->data};
    }
    return Ok{};
  };
  const MoeNames* family_names = names;
  for (size_t l = 0; l < c.layers; ++l) {
    if (!c.layer(l).sparse) continue;
    LayerWeights& w = m.layers[l];
    names = family_names;
    if (hf && names->v5 && !find(hf_router_name(*names, l)) && find(hf_router_name(*names->v5, l))) names = names->v5;
    const std::string router_name = hf ? hf_router_name(*names, l) : gguf_router_name(l);
    auto router = take(router_name, {E, H});
    if (!router) return router.error();
    if (!*router) return make_error(ErrorCode::invalid_argument, source + ": tensor '" + router_name + "' (the router) is missing");
    w.router = Matrix{*(*router)->dtype, E, H, (*router)->data};
    // GPT-OSS's router bias (required where the family names one) and, in GGUF, its experts' biases.
    const std::string router_bias_name = hf ? hf_router_bias_name(*names, l) : gguf_router_bias_name(l);
    if (!router_bias_name.empty()) {
      auto bias = take(router_bias_name, {E});
      if (!bias) return bias.error();
      if (*bias) w.router_bias = Matrix{*(*bias)->dtype, 1, E, (*bias)->data};
      else if (hf) return make_error(ErrorCode::invalid_argument, source + ": tensor '" + router_bias_name + "' (the router's bias) is missing");
    }
    if (hf && names->gpt_oss_layout) {
      if (auto s = assemble_gpt_oss_experts(m, l, source, find); !s) return s;
      continue;
    }
    w.experts.assign(E, ExpertWeights{});
    if (!hf)
      for (ExpertRole role : {ExpertRole::gate, ExpertRole::up, ExpertRole::down}) {
        const size_t width = role == ExpertRole::down ? H : I;
        auto bias = take(gguf_stacked_bias_name(l, role), {E, width});
        if (!bias) return bias.error();
        if (!*bias) continue;
        const auto rows = slices(**bias, E, 1, width);
        for (size_t e = 0; e < E; ++e) w.experts[e].*expert_bias(role) = rows[e];
      }

    // Stacked by role (GGUF), gate and up stacked together (GGUF, transformers v5), or per expert.
    const std::string gate_up_name = hf ? hf_stacked_gate_up_name(*names, l) : gguf_stacked_gate_up_name(l);
    const std::string down_name = hf ? hf_stacked_down_name(*names, l) : gguf_stacked_name(l, ExpertRole::down);
    auto gate_up = take(gate_up_name, {E, 2 * I, H});
    if (!gate_up) return gate_up.error();
    std::optional<FoundTensor> gate, up;
    if (!hf && !*gate_up) {
      auto g = take(gguf_stacked_name(l, ExpertRole::gate), {E, I, H});
      if (!g) return g.error();
      auto u = take(gguf_stacked_name(l, ExpertRole::up), {E, I, H});
      if (!u) return u.error();
      gate = *g, up = *u;
    }
    if (*gate_up || gate || up) {
      if (!*gate_up && !(gate && up))
        return make_error(ErrorCode::invalid_argument, source + ": layer " + std::to_string(l) + " has " +
                                                           (gate ? "ffn_gate_exps but no ffn_up_exps" : "ffn_up_exps but no ffn_gate_exps"));
      auto down = take(down_name, {E, H, I});
      if (!down) return down.error();
      if (!*down) return make_error(ErrorCode::invalid_argument, source + ": tensor '" + down_name + "' is missing");
      const auto downs = slices(**down, E, H, I);
      // gate_up: expert e's 2·I rows, its gate's I first.
      const auto gate_ups = *gate_up ? slices(**gate_up, 2 * E, I, H) : std::vector<Matrix>();
      const auto gates = gate ? slices(*gate, E, I, H) : std::vector<Matrix>();
      const auto ups = up ? slices(*up, E, I, H) : std::vector<Matrix>();
      for (size_t e = 0; e < E; ++e) {
        ExpertWeights& ex = w.experts[e];
        ex.gate = *gate_up ? gate_ups[2 * e] : gates[e], ex.up = *gate_up ? gate_ups[2 * e + 1] : ups[e], ex.down = downs[e];
      }
      continue;
    }
    for (size_t e = 0; e < E; ++e) {
      auto name_of = [&](ExpertRole role) { return hf ? hf_expert_name(*names, l, e, role) : gguf_expert_name(l, e, role); };
      auto missing = [&](const std::string& name) {
        return source + ": layer " + std::to_string(l) + "'s experts are missing: neither '" + name + "' nor the stacked '" +
               gate_up_name + "'" + (hf ? "" : " or '" + gguf_stacked_name(l, ExpertRole::gate) + "'");
      };
      if (auto s = take_projections(w.experts[e], I, name_of, missing); !s) return s;
    }
  }
  // The shared expert (Qwen2-MoE's one), expert id E.
  if (!c.moe.shared_experts) return Ok{};
  const size_t S = c.moe.shared_expert_ffn;
  for (size_t l = 0; l < c.layers; ++l) {
    if (!c.layer(l).sparse) continue;
    ExpertWeights shared;
    auto name_of = [&](ExpertRole role) { return hf ? hf_shared_expert_name(*family_names, l, role) : gguf_shared_expert_name(l, role); };
    auto missing = [&](const std::string& name) { return source + ": tensor '" + name + "' (the shared expert) is missing"; };
    if (auto s = take_projections(shared, S, name_of, missing); !s) return s;
    m.layers[l].experts.push_back(shared);
  }
  return Ok{};
}

}  // namespace larql
