#include "plan/shard_plan.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace larql {

Result<uint64_t> parse_bytes(std::string_view text) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  const std::string_view unit(end, size_t(text.data() + text.size() - end));
  static constexpr std::pair<std::string_view, int> kUnits[] = {{"", 0}, {"K", 10}, {"M", 20}, {"G", 30}, {"T", 40},
                                                                {"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}};
  if (ec == std::errc() && value > 0 && std::isfinite(value))
    for (const auto& [name, shift] : kUnits)
      if (unit == name) return uint64_t(std::ldexp(value, shift));
  return make_error(ErrorCode::invalid_argument,
                    "'" + std::string(text) + "' is not a memory size (a number with K, M, G or T, powers of 1024)");
}

Result<std::vector<Machine>> parse_machines(std::string_view spec) {
  std::vector<Machine> out;
  while (!spec.empty()) {
    const size_t comma = spec.find(',');
    const std::string_view part = spec.substr(0, comma);
    const size_t eq = part.find('=');
    if (eq == std::string_view::npos || eq == 0)
      return make_error(ErrorCode::invalid_argument, "--machines part '" + std::string(part) + "' is not NAME=MEMORY (e.g. a=24G)");
    auto bytes = parse_bytes(part.substr(eq + 1));
    if (!bytes) return bytes.error();
    const std::string name(part.substr(0, eq));
    if (std::any_of(out.begin(), out.end(), [&](const Machine& m) { return m.name == name; }))
      return make_error(ErrorCode::invalid_argument, "--machines names '" + name + "' twice");
    out.push_back({name, *bytes});
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
  }
  if (out.empty()) return make_error(ErrorCode::invalid_argument, "--machines lists no machine");
  return out;
}

namespace {

std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / double(uint64_t(1) << 30));
  return buf;
}

// Contiguous runs of `items` over groups in order, each group's load (its base plus its
// items) at most `fill` × its capacity; the groups' item counts, or empty when they do not fit.
std::vector<size_t> fill_in_order(const std::vector<uint64_t>& items, const std::vector<uint64_t>& base,
                                  const std::vector<uint64_t>& capacity, double fill) {
  std::vector<size_t> counts(capacity.size(), 0);
  size_t g = 0;
  double load = double(base[0]);
  if (load > fill * double(capacity[0])) return {};
  for (uint64_t w : items) {
    while (load + double(w) > fill * double(capacity[g])) {
      if (++g == capacity.size()) return {};
      load = double(base[g]);
      if (load > fill * double(capacity[g])) return {};
    }
    load += double(w);
    ++counts[g];
  }
  return counts;
}

}  // namespace

std::vector<bool> session_cuts(const ModelSizes& sizes) {
  std::vector<bool> cut(sizes.layers, true);
  for (size_t r = 0; r < sizes.layers && r < sizes.kv_source.size(); ++r)
    for (size_t c = sizes.kv_source[r] + 1; c <= r; ++c) cut[c] = false;  // the source and its reader stay together
  return cut;
}

Result<ShardPlan> plan_shards(const ModelSizes& sizes, const std::vector<Machine>& machines, const PlanOptions& o) {
  if (o.replicas == 0 || machines.size() % o.replicas != 0)
    return make_error(ErrorCode::invalid_argument, std::to_string(machines.size()) + " machines do not form groups of " +
                                                       std::to_string(o.replicas) + " replicas");
  ShardPlan plan;
  if (o.sessions && o.split == PlanOptions::Split::experts)
    return make_error(ErrorCode::invalid_argument, "a session shard runs whole layers, every expert of them: sessions split by layers");
  plan.by_experts = !o.sessions && (o.split == PlanOptions::Split::experts || (o.split == PlanOptions::Split::automatic && sizes.experts > 0));
  if (plan.by_experts && sizes.experts == 0)
    return make_error(ErrorCode::invalid_argument, "the model has no experts to split");
  // Groups of replicas, each as large as its smallest machine allows.
  const size_t groups = machines.size() / o.replicas;
  std::vector<uint64_t> usable(groups, UINT64_MAX);
  for (size_t i = 0; i < machines.size(); ++i) {
    const double free = double(machines[i].bytes) * (1.0 - o.headroom) - double(o.process_bytes);
    usable[i / o.replicas] = std::min(usable[i / o.replicas], uint64_t(std::max(0.0, free)));
  }
  std::vector<uint64_t> items, base(groups, 0);
  uint64_t dense = 0;
  if (plan.by_experts) {
    // Every expert weighs the same: all layers' expert bytes shared out; the dense MLPs go
    // with the first group's experts.
    const uint64_t experts = std::accumulate(sizes.expert_ffn.begin(), sizes.expert_ffn.end(), uint64_t{0});
    dense = std::accumulate(sizes.dense_ffn.begin(), sizes.dense_ffn.end(), uint64_t{0});
    items.assign(sizes.experts, experts / sizes.experts);
    base[0] = dense;
  } else if (!o.sessions) {
    for (size_t l = 0; l < sizes.layers; ++l) items.push_back(sizes.dense_ffn[l] + sizes.expert_ffn[l]);
  }
  // Sessions: runs of layers that may not be split (a KV-sharing group and what lies
  // between), each its weights and its KV budget.
  std::vector<size_t> run_layers;  // layers per item
  auto session_kv = [&](size_t first, size_t last) {
    return sizes.kv_bytes(o.session_positions, 2048, first, last) * o.session_sequences;
  };
  if (o.sessions) {
    const std::vector<bool> cut = session_cuts(sizes);
    for (size_t l = 0; l < sizes.layers; ++l) {
      if (cut[l]) items.push_back(0), run_layers.push_back(0);
      items.back() += sizes.layer_bytes(l, l) + session_kv(l, l);
      ++run_layers.back();
    }
  }
  // The smallest fill of the fullest group that fits, by bisection over [0, 1].
  if (fill_in_order(items, base, usable, 1.0).empty()) {
    uint64_t room = 0;
    for (uint64_t u : usable) room += u;
    return make_error(ErrorCode::invalid_argument,
                      std::string(o.sessions ? "the session shards' share (every layer with its KV budget, " : "the model's FFN (") +
                          gib(o.sessions ? std::accumulate(items.begin(), items.end(), uint64_t{0}) : sizes.ffn_total()) +
                          ") does not fit these machines: they hold " + gib(room) +
                          " for weights in " + std::to_string(groups) + " contiguous ranges (after " +
                          std::to_string(int(o.headroom * 100)) + "% headroom and " + gib(o.process_bytes) +
                          " per process); add machines or memory, or quantise the model (larql quantize)");
  }
  double lo = 0, hi = 1;
  for (int i = 0; i < 50; ++i) {
    const double mid = (lo + hi) / 2;
    (fill_in_order(items, base, usable, mid).empty() ? lo : hi) = mid;
  }
  const std::vector<size_t> counts = fill_in_order(items, base, usable, hi);
  size_t next = 0, next_layer = 0;
  for (size_t g = 0; g < groups; ++g) {
    std::vector<std::string> members;
    for (size_t r = 0; r < o.replicas; ++r) members.push_back(machines[g * o.replicas + r].name);
    if (counts[g] == 0 && !(plan.by_experts && g == 0 && dense > 0)) {
      plan.unused.insert(plan.unused.end(), members.begin(), members.end());
      continue;
    }
    ShardAssignment a;
    a.machines = members;
    a.first = next;
    a.last = next + counts[g] - 1;  // first > last: the dense MLPs only
    if (counts[g] == 0) a.first = 1, a.last = 0;
    a.dense = plan.by_experts && g == 0 && dense > 0;
    a.bytes = base[g];
    a.usable = usable[g];
    for (size_t k = 0; k < counts[g]; ++k) a.bytes += items[next + k];
    if (o.sessions) {  // items are runs of layers: back to layers
      size_t layers = 0;
      for (size_t k = 0; k < counts[g]; ++k) layers += run_layers[next + k];
      a.first = next_layer, a.last = next_layer + layers - 1;
      a.kv_bytes = session_kv(a.first, a.last);
      next_layer += layers;
    }
    next += counts[g];
    plan.shards.push_back(std::move(a));
  }
  return plan;
}

std::string shard_map(const ShardPlan& plan, const ModelSizes& sizes, int port) {
  auto urls = [port](const ShardAssignment& a) {
    std::string out;
    for (const auto& m : a.machines) out += (out.empty() ? "" : "|") + ("http://" + m + ":" + std::to_string(port));
    return out;
  };
  const std::string all_layers = "0-" + std::to_string(sizes.layers - 1);
  std::string map;
  for (const auto& a : plan.shards) {
    if (a.first > a.last) continue;  // a by-experts shard of the dense MLPs only
    if (!map.empty()) map += ",";
    map += (plan.by_experts ? all_layers + "/" : "") + std::to_string(a.first) + "-" + std::to_string(a.last) + "=" + urls(a);
  }
  for (const auto& a : plan.shards)
    if (a.dense) map += (map.empty() ? "" : ",") + all_layers + "/dense=" + urls(a);
  return map;
}

}  // namespace larql
