// Messages of POST /v1/walk-experts (PROTOCOL §12): the client's routing decisions for a
// mixture-of-experts layer (which rows go to which experts, with what weight) and the
// experts' results, as weighted sums or per-expert rows. Parsers check framing only and
// never trust a length; check_assignments checks the decisions themselves, separately, so
// that a server can report errors in §12's order.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/errors.h"
#include "wire/codec.h"
#include "wire/encoding.h"

namespace larql::wire {

inline constexpr uint32_t kFlagExpertRows = 2u;  // bit 1: answer per-expert rows, not weighted sums

// One position's use of one expert.
struct ExpertAssignment {
  uint32_t row;
  uint32_t expert;
  float weight;
  bool operator==(const ExpertAssignment&) const = default;
};

struct ExpertRequestView {
  uint32_t layer = 0;
  uint32_t rows = 0;
  uint32_t flags = kFlagFullOutput;
  std::vector<ExpertAssignment> assignments;
  Bytes values;  // exactly rows × hidden values in the request encoding
  bool expert_rows() const { return flags & kFlagExpertRows; }
};

// [layer][rows][flags][n] + n × (row, expert, weight) + rows × hidden values. Falls back to
// f32 when the encoding cannot carry the values. Errors: bad_seq_len (rows = 0),
// bad_length (values size), non_finite_input.
Result<EncodeOutcome> encode_expert_request(Encoding encoding, uint32_t layer, uint32_t rows, bool expert_rows,
                                            std::span<const ExpertAssignment> assignments, size_t hidden,
                                            std::span<const float> values, std::string& out);

// Writes a request around values that are already encoded (a router forwarding a part).
void write_expert_request_with_values(uint32_t layer, uint32_t rows, uint32_t flags,
                                      std::span<const ExpertAssignment> assignments, Bytes values, std::string& out);

// Framing: truncated, bad_seq_len, bad_length, full_output_required.
Result<ExpertRequestView> parse_expert_request(Bytes body, Encoding encoding, size_t hidden);

// §12's rules for a layer with `experts` ids (routed and shared): n ≥ 1, sorted by row then
// expert id, no duplicate, every row used, row < rows, expert < experts, finite weights.
// bad_assignment otherwise, naming the first offence.
Status check_assignments(std::span<const ExpertAssignment> assignments, uint32_t rows, uint32_t experts);

// out[row] = Σ over the row's assignments in order of weight · expert_rows[i], each product
// rounded to f32 and added to a running sum that starts at the first term: the one order
// that makes any split of the experts over machines bit-identical (§12). expert_rows is
// [n][hidden], one per assignment; out is [rows][hidden]; every row has an assignment.
void sum_expert_rows(std::span<const ExpertAssignment> assignments, const float* expert_rows, size_t hidden,
                     float* out);

// The share of a request's assignments whose experts lie in [first, last], as a request of
// its own: only the rows that have such an assignment, renumbered from 0.
struct ExpertPart {
  std::vector<uint32_t> rows;                 // the original row of each of the part's rows
  std::vector<ExpertAssignment> assignments;  // with the part's row numbers
  std::vector<uint32_t> sources;              // per part assignment: its index among the original ones
};
ExpertPart take_expert_range(std::span<const ExpertAssignment> assignments, uint32_t first, uint32_t last);

// Per-expert rows response: [layer][n][latency_ms] + n × hidden values. Falls back to f32
// when the encoding cannot carry them; non_finite_output when not even f32 can.
Result<EncodeOutcome> encode_expert_rows_response(Encoding encoding, uint32_t layer, uint32_t n, size_t hidden,
                                                  std::span<const float> values, float latency_ms, std::string& out);

struct ExpertRowsView {
  uint32_t layer = 0;
  uint32_t n = 0;
  float latency_ms = 0;
  Bytes values;  // n × hidden values in the response encoding
};

Result<ExpertRowsView> parse_expert_rows_response(Bytes body, Encoding encoding, size_t hidden);

// Writes a per-expert rows response around values that are already encoded (a router
// splicing its parts' answers).
void write_expert_rows_response(uint32_t layer, uint32_t n, float latency_ms, Bytes values, std::string& out);

}  // namespace larql::wire
