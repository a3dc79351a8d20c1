// `larql bench`'s reporters (eval/wire_report.h) on a report made here: the JSON document's
// fields, one table row per format, and a chart that tells every format apart and survives
// any model name.
#include "eval/wire_report.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

namespace larql {
namespace {

using wire::Encoding;

WireBenchReport four_formats() {
  WireBenchReport r;
  r.model = "tiny <test> & co";
  r.steps = 3, r.k = 5, r.total_steps = 3;
  r.links = {{"1Gbit/0.2ms", 1000, 0.2}};
  for (Encoding e : {Encoding::f32, Encoding::f16, Encoding::q8, Encoding::i8}) {
    FormatReport f;
    f.wire = e;
    f.exact = e == Encoding::f32;
    f.top1_agreement = f.topk_agreement = 1.0;
    f.kl_per_step = {0.0, 1e-6, 1e-4};
    f.topk_per_step = {true, true, true};
    f.bytes_sent_per_token = 100 * double(int(e) + 1);
    f.projected_tokens_per_second["1Gbit/0.2ms"] = 50;
    r.formats.push_back(f);
  }
  r.layers = {{1.5f, 2.5f, 0}};
  return r;
}

TEST(WireReport, TheJsonDocumentHasEveryFormatAndLayer) {
  const auto doc = report_json(four_formats());
  EXPECT_EQ(doc["model"], "tiny <test> & co");
  ASSERT_EQ(doc["formats"].size(), 4u);
  EXPECT_EQ(doc["formats"][2]["wire"], "q8");
  EXPECT_EQ(doc["formats"][0]["exact"], true);
  EXPECT_EQ(doc["formats"][1]["kl_per_step"].size(), 3u);
  ASSERT_EQ(doc["layers"].size(), 1u);
  EXPECT_EQ(doc["layers"][0]["max_abs_output"], 2.5);
}

TEST(WireReport, TheTableHasARowPerFormat) {
  const std::string table = report_table(four_formats());
  for (const char* name : {"\nf32 ", "\nf16 ", "\nq8 ", "\ni8 "}) EXPECT_NE(table.find(name), std::string::npos) << name;
  EXPECT_NE(table.find("1Gbit/0.2ms 50.0"), std::string::npos) << table;
}

TEST(WireReport, TheChartGivesEachFormatItsOwnColourAndEscapesTheModelName) {
  const std::string svg = report_svg(four_formats());
  std::set<std::string> strokes;
  const std::regex polyline("<polyline fill='none' stroke='(#[0-9a-f]{6})'");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), polyline); it != std::sregex_iterator(); ++it)
    strokes.insert((*it)[1]);
  EXPECT_EQ(strokes.size(), 4u) << svg;
  EXPECT_NE(svg.find("tiny &lt;test&gt; &amp; co"), std::string::npos);
  EXPECT_EQ(svg.find("<test>"), std::string::npos) << "the name would open an element";
}

}  // namespace
}  // namespace larql
