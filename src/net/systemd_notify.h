// systemd's readiness protocol, without libsystemd: a service started with Type=notify finds
// $NOTIFY_SOCKET in its environment and sends "READY=1" there once it serves, "STOPPING=1"
// when it begins to stop. Without the variable (not under systemd) nothing happens.
#pragma once

#include <string_view>

namespace larql {

// Sends `state` (e.g. "READY=1") to $NOTIFY_SOCKET, a path or an abstract name ("@…");
// false when there is none or it cannot be reached (the service goes on either way).
bool notify_systemd(std::string_view state);

}  // namespace larql
