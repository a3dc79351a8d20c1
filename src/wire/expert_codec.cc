#include "wire/expert_codec.h"

#include <cmath>
#include <cstring>

#include "base/byte_io.h"

namespace larql::wire {
namespace {

constexpr size_t kRequestHeader = 16;     // layer, rows, flags, n
constexpr size_t kAssignmentBytes = 12;   // row, expert, weight
constexpr size_t kExpertRowsHeader = 12;  // layer, n, latency_ms

std::string str(size_t v) { return std::to_string(v); }

size_t request_head_bytes(size_t n) { return kRequestHeader + n * kAssignmentBytes; }

void write_expert_request_head(uint32_t layer, uint32_t rows, uint32_t flags,
                               std::span<const ExpertAssignment> assignments, uint8_t* p) {
  store_u32(p, layer);
  store_u32(p + 4, rows);
  store_u32(p + 8, flags);
  store_u32(p + 12, uint32_t(assignments.size()));
  p += kRequestHeader;
  for (const ExpertAssignment& a : assignments) {
    store_u32(p, a.row);
    store_u32(p + 4, a.expert);
    store_f32(p + 8, a.weight);
    p += kAssignmentBytes;
  }
}

std::string describe(const ExpertAssignment& a, size_t i) {
  return "assignment " + str(i) + " (row " + str(a.row) + ", expert " + str(a.expert) + ")";
}

}  // namespace

Result<EncodeOutcome> encode_expert_request(Encoding encoding, uint32_t layer, uint32_t rows, bool expert_rows,
                                            std::span<const ExpertAssignment> assignments, size_t hidden,
                                            std::span<const float> values, std::string& out) {
  if (rows == 0) return make_error(ErrorCode::bad_seq_len, "rows is 0; expected at least 1");
  if (values.size() != size_t{rows} * hidden)
    return make_error(ErrorCode::bad_length, "expert input has " + str(values.size()) + " values, expected " +
                                                 str(size_t{rows} * hidden) + " (rows=" + str(rows) +
                                                 " × hidden=" + str(hidden) + ")");
  const uint32_t flags = kFlagFullOutput | (expert_rows ? kFlagExpertRows : 0);
  const size_t head = request_head_bytes(assignments.size());
  EncodeOutcome outcome = encoding_fits_hidden(encoding, hidden) ? EncodeOutcome{encoding, false}
                                                                 : EncodeOutcome{Encoding::f32, true};
  for (;;) {
    out.resize(head + *values_byte_size(outcome.encoding, rows, hidden));
    auto* p = reinterpret_cast<uint8_t*>(out.data());
    write_expert_request_head(layer, rows, flags, assignments, p);
    if (write_values(outcome.encoding, values.data(), rows, hidden, p + head)) return outcome;
    if (outcome.encoding == Encoding::f32)
      return make_error(ErrorCode::non_finite_input, "expert input holds a non-finite value: " + first_non_finite(values, hidden));
    outcome = {Encoding::f32, true};
  }
}

void write_expert_request_with_values(uint32_t layer, uint32_t rows, uint32_t flags,
                                      std::span<const ExpertAssignment> assignments, Bytes values, std::string& out) {
  const size_t head = request_head_bytes(assignments.size());
  out.resize(head + values.size());
  write_expert_request_head(layer, rows, flags, assignments, reinterpret_cast<uint8_t*>(out.data()));
  if (!values.empty()) std::memcpy(out.data() + head, values.data(), values.size());
}

Result<ExpertRequestView> parse_expert_request(Bytes body, Encoding encoding, size_t hidden) {
  const size_t size = body.size();
  const uint8_t* p = body.data();
  if (size < kRequestHeader)
    return make_error(ErrorCode::truncated, "expert request ends inside its header: " + str(size) +
                                                " bytes, expected at least 16 (layer, rows, flags, n)");
  ExpertRequestView view;
  view.layer = load_u32(p);
  view.rows = load_u32(p + 4);
  view.flags = load_u32(p + 8);
  const uint32_t n = load_u32(p + 12);
  // n ≤ 2^32 - 1, so n × 12 fits a 64-bit size_t; compared with what the body has left.
  if (size_t{n} * kAssignmentBytes > size - kRequestHeader)
    return make_error(ErrorCode::truncated, "expert request names " + str(n) + " assignments (" +
                                                str(size_t{n} * kAssignmentBytes) + " bytes) but only " +
                                                str(size - kRequestHeader) + " bytes follow its header");
  const size_t head = request_head_bytes(n);
  if (auto s = check_value_bytes(encoding, size - head, view.rows, hidden, "expert input"); !s) return s.error();
  if (!(view.flags & kFlagFullOutput))
    return make_error(ErrorCode::full_output_required,
                      "flags=" + str(view.flags) + " has bit 0 (full_output) clear; the binary path requires it set");
  view.assignments.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* a = p + kRequestHeader + i * kAssignmentBytes;
    view.assignments[i] = {load_u32(a), load_u32(a + 4), load_f32(a + 8)};
  }
  view.values = body.subspan(head);
  return view;
}

Status check_assignments(std::span<const ExpertAssignment> assignments, uint32_t rows, uint32_t experts) {
  auto bad = [](const std::string& what) { return make_error(ErrorCode::bad_assignment, what); };
  if (assignments.empty()) return bad("the request has no assignments; expected at least one per row");
  uint32_t next_row = 0;  // every row from 0 up must appear, in order
  for (size_t i = 0; i < assignments.size(); ++i) {
    const ExpertAssignment& a = assignments[i];
    if (a.row >= rows) return bad(describe(a, i) + " names row " + str(a.row) + "; the request has " + str(rows) + " rows");
    if (a.expert >= experts)
      return bad(describe(a, i) + " names expert " + str(a.expert) + "; the layer has experts 0-" + str(experts - 1));
    if (!std::isfinite(a.weight)) return bad(describe(a, i) + " has a non-finite weight");
    if (i > 0) {
      const ExpertAssignment& prev = assignments[i - 1];
      if (a.row < prev.row || (a.row == prev.row && a.expert < prev.expert))
        return bad(describe(a, i) + " comes after (row " + str(prev.row) + ", expert " + str(prev.expert) +
                   "); expected sorted by row, then expert id");
      if (a.row == prev.row && a.expert == prev.expert)
        return bad(describe(a, i) + " repeats the one before it; a row's experts are distinct");
    }
    if (a.row > next_row) return bad("row " + str(next_row) + " has no assignment; every row needs at least one");
    next_row = a.row + 1;
  }
  if (next_row < rows) return bad("row " + str(next_row) + " has no assignment; every row needs at least one");
  return Ok{};
}

void sum_expert_rows(std::span<const ExpertAssignment> assignments, const float* expert_rows, size_t hidden,
                     float* out) {
  for (size_t i = 0; i < assignments.size(); ++i) {
    const ExpertAssignment& a = assignments[i];
    float* o = out + size_t{a.row} * hidden;
    const float* y = expert_rows + i * hidden;
    const float w = a.weight;
    // Assignments are sorted by row: the first of a row starts its sum.
    if (i == 0 || assignments[i - 1].row != a.row)
      for (size_t k = 0; k < hidden; ++k) o[k] = w * y[k];
    else
      for (size_t k = 0; k < hidden; ++k) o[k] += w * y[k];
  }
}

ExpertPart take_expert_range(std::span<const ExpertAssignment> assignments, uint32_t first, uint32_t last) {
  ExpertPart part;
  for (size_t i = 0; i < assignments.size(); ++i) {
    const ExpertAssignment& a = assignments[i];
    if (a.expert < first || a.expert > last) continue;
    if (part.rows.empty() || part.rows.back() != a.row) part.rows.push_back(a.row);
    part.assignments.push_back({uint32_t(part.rows.size() - 1), a.expert, a.weight});
    part.sources.push_back(uint32_t(i));
  }
  return part;
}

Result<EncodeOutcome> encode_expert_rows_response(Encoding encoding, uint32_t layer, uint32_t n, size_t hidden,
                                                  std::span<const float> values, float latency_ms, std::string& out) {
  if (n == 0) return make_error(ErrorCode::bad_seq_len, "a per-expert rows response needs at least one row");
  if (values.size() != size_t{n} * hidden)
    return make_error(ErrorCode::bad_length, "expert rows hold " + str(values.size()) + " values, expected " +
                                                 str(size_t{n} * hidden));
  EncodeOutcome outcome = encoding_fits_hidden(encoding, hidden) ? EncodeOutcome{encoding, false}
                                                                 : EncodeOutcome{Encoding::f32, true};
  for (;;) {
    out.resize(kExpertRowsHeader + *values_byte_size(outcome.encoding, n, hidden));
    auto* p = reinterpret_cast<uint8_t*>(out.data());
    store_u32(p, layer);
    store_u32(p + 4, n);
    store_f32(p + 8, latency_ms);
    if (write_values(outcome.encoding, values.data(), n, hidden, p + kExpertRowsHeader)) return outcome;
    if (outcome.encoding == Encoding::f32)
      return make_error(ErrorCode::non_finite_output, "expert output for layer " + str(layer) +
                                                          " holds a non-finite value: " + first_non_finite(values, hidden));
    outcome = {Encoding::f32, true};
  }
}

Result<ExpertRowsView> parse_expert_rows_response(Bytes body, Encoding encoding, size_t hidden) {
  if (body.size() < kExpertRowsHeader)
    return make_error(ErrorCode::truncated, "per-expert rows response ends inside its header: " + str(body.size()) +
                                                " bytes, expected at least 12 (layer, n, latency_ms)");
  ExpertRowsView view{load_u32(body.data()), load_u32(body.data() + 4), load_f32(body.data() + 8), {}};
  if (!std::isfinite(view.latency_ms)) return make_error(ErrorCode::non_finite_input, "response latency_ms is not finite");
  if (auto s = check_value_bytes(encoding, body.size() - kExpertRowsHeader, view.n, hidden, "expert rows"); !s)
    return s.error();
  view.values = body.subspan(kExpertRowsHeader);
  return view;
}

void write_expert_rows_response(uint32_t layer, uint32_t n, float latency_ms, Bytes values, std::string& out) {
  out.resize(kExpertRowsHeader + values.size());
  auto* p = reinterpret_cast<uint8_t*>(out.data());
  store_u32(p, layer);
  store_u32(p + 4, n);
  store_f32(p + 8, latency_ms);
  if (!values.empty()) std::memcpy(p + kExpertRowsHeader, values.data(), values.size());
}

}  // namespace larql::wire
