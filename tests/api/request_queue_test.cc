// The engine's queue: one turn at a time in arrival order, a bounded number waiting
// (beyond it: full), and a waiter whose client leaves gives its place up at once.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "api/request_queue.h"
#include "support/eventually.h"

namespace larql {
namespace {

TEST(RequestQueue, OneTurnAtATimeInOrderAndFullBeyondTheBound) {
  RequestQueue q(1);
  RequestQueue::Refusal refusal;
  auto first = q.wait_turn({}, refusal);
  ASSERT_TRUE(first);
  std::atomic<bool> second_ran = false;
  std::thread second([&] {
    RequestQueue::Refusal r;
    auto turn = q.wait_turn({}, r);
    second_ran = turn != nullptr;
  });
  ASSERT_TRUE(test::eventually([&] { return q.waiting() == 1; }));
  EXPECT_FALSE(q.wait_turn({}, refusal)) << "one running and one waiting: full";
  EXPECT_EQ(refusal, RequestQueue::Refusal::full);
  EXPECT_FALSE(second_ran);
  first.reset();
  second.join();
  EXPECT_TRUE(second_ran);
  EXPECT_FALSE(q.running());
}

TEST(RequestQueue, AWaiterWhoseClientLeftGivesItsPlaceUp) {
  RequestQueue q(1);
  RequestQueue::Refusal refusal;
  auto running = q.wait_turn({}, refusal);
  std::atomic<bool> gone = false;
  RequestQueue::Refusal left_refusal = RequestQueue::Refusal::none;
  std::thread leaver([&] { EXPECT_FALSE(q.wait_turn([&] { return gone.load(); }, left_refusal)); });
  ASSERT_TRUE(test::eventually([&] { return q.waiting() == 1; }));
  gone = true;
  leaver.join();
  EXPECT_EQ(left_refusal, RequestQueue::Refusal::client_gone);
  EXPECT_EQ(q.waiting(), 0u) << "its place is free";
  std::thread next([&] {
    RequestQueue::Refusal r;
    EXPECT_TRUE(q.wait_turn({}, r)) << "not refused as full";
  });
  ASSERT_TRUE(test::eventually([&] { return q.waiting() == 1; }));
  running.reset();
  next.join();
}

}  // namespace
}  // namespace larql
