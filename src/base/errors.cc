#include "base/errors.h"

namespace larql {

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::truncated: return "truncated";
    case ErrorCode::bad_length: return "bad_length";
    case ErrorCode::bad_seq_len: return "bad_seq_len";
    case ErrorCode::bad_layer_count: return "bad_layer_count";
    case ErrorCode::full_output_required: return "full_output_required";
    case ErrorCode::non_finite_input: return "non_finite_input";
    case ErrorCode::bad_i8_block: return "bad_i8_block";
    case ErrorCode::bad_q8_block: return "bad_q8_block";
    case ErrorCode::invalid_json: return "invalid_json";
    case ErrorCode::layer_out_of_range: return "layer_out_of_range";
    case ErrorCode::layer_not_owned: return "layer_not_owned";
    case ErrorCode::no_owning_shard: return "no_owning_shard";
    case ErrorCode::unauthorized: return "unauthorized";
    case ErrorCode::not_found: return "not_found";
    case ErrorCode::method_not_allowed: return "method_not_allowed";
    case ErrorCode::body_too_large: return "body_too_large";
    case ErrorCode::unsupported_media_type: return "unsupported_media_type";
    case ErrorCode::overloaded: return "overloaded";
    case ErrorCode::non_finite_output: return "non_finite_output";
    case ErrorCode::internal: return "internal";
    case ErrorCode::shard_unavailable: return "shard_unavailable";
    case ErrorCode::shard_timeout: return "shard_timeout";
    case ErrorCode::duplicate_layer: return "duplicate_layer";
    case ErrorCode::work_too_large: return "work_too_large";
    case ErrorCode::deadline_exceeded: return "deadline_exceeded";
    case ErrorCode::bad_request: return "bad_request";
    case ErrorCode::cancelled: return "cancelled";
    case ErrorCode::invalid_argument: return "invalid_argument";
    case ErrorCode::expert_not_owned: return "expert_not_owned";
    case ErrorCode::bad_assignment: return "bad_assignment";
    case ErrorCode::not_moe_layer: return "not_moe_layer";
    case ErrorCode::session_unknown: return "session_unknown";
    case ErrorCode::session_lost: return "session_lost";
    case ErrorCode::bad_position: return "bad_position";
    case ErrorCode::stale_step: return "stale_step";
    case ErrorCode::context_full: return "context_full";
    case ErrorCode::bad_max_positions: return "bad_max_positions";
    case ErrorCode::duplicate_session: return "duplicate_session";
    case ErrorCode::bad_token: return "bad_token";
    case ErrorCode::bad_sequence_count: return "bad_sequence_count";
    case ErrorCode::bad_flags: return "bad_flags";
  }
  return "internal";
}

int http_status(ErrorCode code) {
  switch (code) {
    case ErrorCode::unauthorized: return 401;
    case ErrorCode::not_found: return 404;
    case ErrorCode::method_not_allowed: return 405;
    case ErrorCode::bad_position:
    case ErrorCode::stale_step: return 409;
    case ErrorCode::session_unknown:
    case ErrorCode::session_lost: return 410;
    case ErrorCode::body_too_large:
    case ErrorCode::work_too_large: return 413;
    case ErrorCode::cancelled: return 499;  // nginx's "client closed request"; nobody reads it
    case ErrorCode::unsupported_media_type: return 415;
    case ErrorCode::overloaded: return 503;
    case ErrorCode::non_finite_output:
    case ErrorCode::internal: return 500;
    case ErrorCode::shard_unavailable: return 502;
    case ErrorCode::shard_timeout:
    case ErrorCode::deadline_exceeded: return 504;
    default: return 400;
  }
}

}  // namespace larql
