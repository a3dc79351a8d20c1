// Any two shard answers into the router's splice (net/range_split.h): a request for layers
// {4, 1, 5, 0} split over ranges 0-2 and 3-5, in the encoding (or JSON) the first byte
// picks; the next two bytes pick each answer's Content-Type, the two after them where the
// first answer ends. What the splice accepts must read back as an answer to the request.
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "net/range_split.h"
#include "wire/codec.h"
#include "wire/json_codec.h"

using namespace larql;

namespace {

constexpr size_t kHidden = 32;
const std::vector<uint32_t> kLayers{4, 1, 5, 0};

std::string content_type_for(uint8_t pick) {
  if (pick < std::size(wire::kEncodings)) return std::string(wire::kEncodings[pick].content_type);
  return pick % 2 ? "application/json" : "text/plain";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 5) return 0;
  const std::vector<float> x(kHidden, 0.25f);
  std::string body;
  const bool json = data[0] >= std::size(wire::kEncodings);
  if (json) {
    body = wire::encode_json_request(kLayers, 1, x);
  } else if (!wire::encode_request(wire::kEncodings[data[0]].encoding, {.layers = kLayers, .seq_len = 1}, kHidden, x, body)) {
    return 0;
  }
  auto request = read_walk_request(body, json ? "application/json" : content_type_for(data[0]), kHidden);
  fuzz::check(request.ok());
  auto parts = split_by_range(
      request->layers(),
      [](uint32_t l) -> std::optional<LayerOwner> { return l <= 2 ? LayerOwner{0, {0, 2}} : LayerOwner{1, {3, 5}}; }, "");
  fuzz::check(parts.ok() && parts->size() == 2);
  const size_t rest = size - 5, cut = std::min(rest, size_t(data[3]) | size_t(data[4]) << 8);
  const char* answers = reinterpret_cast<const char*>(data + 5);
  const std::vector<PartAnswer> given{{"http://b", content_type_for(data[1]), std::string(answers, cut)},
                                      {"http://a", content_type_for(data[2]), std::string(answers + cut, rest - cut)}};
  auto spliced = splice_answers(*request, *parts, given, kHidden);
  if (!spliced) return 0;
  if (json) {
    auto read = wire::parse_json_response(spliced->body, kHidden);
    fuzz::check(read.ok() && read->records.size() == kLayers.size());
    for (size_t i = 0; i < kLayers.size(); ++i) fuzz::check(read->records[i].layer == kLayers[i]);
    return 0;
  }
  const auto encoding = wire::body_type_from_content_type(spliced->content_type).binary;
  fuzz::check(encoding.has_value());
  auto read = wire::parse_response(wire::as_bytes(spliced->body), *encoding, kHidden);
  fuzz::check(read.ok() && read->records.size() == kLayers.size());
  for (size_t i = 0; i < kLayers.size(); ++i) fuzz::check(read->records[i].layer == kLayers[i] && read->records[i].seq_len == 1);
  return 0;
}
