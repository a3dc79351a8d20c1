// What a session shard and a router share about session ids (PROTOCOL §13): ids are 16
// bytes from the operating system's CSPRNG, and a session belongs to the Authorization it
// was opened with, kept as a hash.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "wire/session_codec.h"

namespace larql {

// 16 bytes from getrandom, drawn again while `taken` says an id is in use.
wire::SessionId new_session_id(const std::function<bool(const wire::SessionId&)>& taken);

// SHA-256 of an Authorization value ("" for none): what a session is bound to.
std::string authorization_hash(std::string_view authorization);

}  // namespace larql
