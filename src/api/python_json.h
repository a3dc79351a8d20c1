// JSON as chat templates write it: Jinja's `tojson` in transformers is Python's
// json.dumps(ensure_ascii=False), so items are separated by ", " and keys by ": ", or with
// an indent each item on its own line; keys stay in the order given.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace larql {

// indent < 0: on one line.
std::string python_json(const nlohmann::ordered_json& value, int indent = -1);

}  // namespace larql
