// `larql bench --links`: the links a run projects tokens/s for.
#include <gtest/gtest.h>

#include "eval/wire_bench.h"

namespace larql {
namespace {

TEST(Links, RatesAndRoundTripsAreReadWithTheirUnits) {
  auto links = parse_links("1Gbit/0.2ms,100Mbit/2ms,512kbit/20ms");
  ASSERT_TRUE(links.ok()) << links.error().message;
  ASSERT_EQ(links->size(), 3u);
  EXPECT_EQ((*links)[0].name, "1Gbit_0.2ms");
  EXPECT_DOUBLE_EQ((*links)[0].megabits_per_second, 1000);
  EXPECT_DOUBLE_EQ((*links)[0].rtt_ms, 0.2);
  EXPECT_DOUBLE_EQ((*links)[1].megabits_per_second, 100);
  EXPECT_DOUBLE_EQ((*links)[2].megabits_per_second, 0.512);
  EXPECT_DOUBLE_EQ((*links)[2].rtt_ms, 20);
  // The default is the same three links written out.
  auto defaults = parse_links("1Gbit/0.2ms,100Mbit/2ms,10Mbit/20ms");
  ASSERT_TRUE(defaults.ok());
  ASSERT_EQ(defaults->size(), what_if_links().size());
  for (size_t i = 0; i < defaults->size(); ++i) EXPECT_EQ((*defaults)[i].name, what_if_links()[i].name);
}

TEST(Links, AMalformedLinkIsNamed) {
  for (const char* bad : {"100Mbit", "100/2ms", "100Mbit/2", "0Mbit/2ms", "xMbit/2ms", "100Mbit/-1ms", "100Mbit/ms", ""}) {
    auto links = parse_links(bad);
    ASSERT_FALSE(links.ok()) << bad;
    if (*bad) {
      EXPECT_NE(links.error().message.find(std::string("'") + bad + "'"), std::string::npos) << links.error().message;
    }
  }
}

TEST(LinkModel, BytesOnTheLinkAreHeadsAndBodiesInFramedSegments) {
  EXPECT_DOUBLE_EQ(framed_bytes(1448, 1), 1448 + 90);       // one full segment
  EXPECT_DOUBLE_EQ(framed_bytes(1449, 1), 1449 + 2 * 90);   // a byte more needs a second
  EXPECT_DOUBLE_EQ(framed_bytes(2896, 2), 2896 + 2 * 90);   // two messages of one segment each
  // 8 Mbit/s carries one byte per microsecond: 1000 bytes are 1 ms.
  const LinkTraffic t{.local_ms = 1, .server_ms = 2, .transport_ms = 0.5, .round_trips = 2,
                      .body_bytes_sent = 1000, .body_bytes_received = 1000, .head_bytes_sent = 200, .head_bytes_received = 200};
  const double each_way = 1200 + 2 * 90;
  EXPECT_DOUBLE_EQ(projected_ms_per_token(t, {"8Mbit_10ms", 8, 10}), 1 + 2 + 0.5 + 2 * 10 + 2 * each_way / 1000);
  // Round trips and bytes cost nothing on an infinitely fast link with no delay.
  EXPECT_NEAR(projected_ms_per_token(t, {"inf", 1e12, 0}), 3.5, 1e-6);
}

}  // namespace
}  // namespace larql
