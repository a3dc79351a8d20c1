// Whether a host name resolves only to loopback addresses: a load generator aimed
// elsewhere by a typo would be an attack, so `larql loadtest` needs --allow-remote for that.
#pragma once

#include <string>

namespace larql::loadtest {

bool resolves_to_loopback_only(const std::string& host);

}  // namespace larql::loadtest
