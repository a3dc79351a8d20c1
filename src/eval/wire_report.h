// `larql bench`'s report of a run (eval/wire_bench.h): the JSON document, the table
// printed on the terminal and the SVG chart.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "eval/wire_bench.h"

namespace larql {

nlohmann::json report_json(const WireBenchReport& r);
std::string report_table(const WireBenchReport& r);
// KL per step for each format (log scale) beside bytes per token.
std::string report_svg(const WireBenchReport& r);

}  // namespace larql
