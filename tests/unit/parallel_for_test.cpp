// parallel_for: every index once, on worker threads, and the lowest failing index's exception.
// Deterministic: no sleeps; where timing matters, atomics make one call wait for another.
#include "crest/core/parallel_for.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "crest/core/error.hpp"

namespace crest {
namespace {

TEST(ParallelFor, NothingToDo) {
  std::atomic<int> calls{0};
  parallel_for(0, 4, [&](size_t) { ++calls; });
  parallel_for(0, 0, [&](size_t, int) { ++calls; });
  EXPECT_EQ(calls.load(), 0);
}

TEST(ParallelFor, OneThreadRunsInOrderOffTheCallingThread) {
  std::vector<size_t> order;
  std::set<std::thread::id> ids;
  std::set<int> workers;
  parallel_for(50, 1, [&](size_t i, int worker) {
    order.push_back(i);  // one thread: no race
    ids.insert(std::this_thread::get_id());
    workers.insert(worker);
  });
  ASSERT_EQ(order.size(), 50u);
  for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], i);
  EXPECT_EQ(ids.size(), 1u);
  EXPECT_EQ(ids.count(std::this_thread::get_id()), 0u);
  EXPECT_EQ(workers, std::set<int>{0});
  // threads < 1 counts as one.
  order.clear();
  parallel_for(3, 0, [&](size_t i) { order.push_back(i); });
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2}));
}

TEST(ParallelFor, EveryIndexOnceOnAtMostNThreads) {
  constexpr size_t n = 1000;
  std::vector<std::atomic<int>> seen(n);
  std::mutex mu;
  std::set<int> workers;
  parallel_for(n, 4, [&](size_t i, int worker) {
    ++seen[i];
    std::lock_guard lock(mu);
    workers.insert(worker);
  });
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(seen[i].load(), 1) << i;
  for (int w : workers) EXPECT_TRUE(w >= 0 && w < 4) << w;

  // More threads than items: one thread per item. Each call waits until all three have started,
  // which only returns if three threads run them at once.
  std::atomic<int> started{0};
  std::set<int> few;
  parallel_for(3, 16, [&](size_t, int worker) {
    {
      std::lock_guard lock(mu);
      few.insert(worker);
    }
    ++started;
    started.notify_all();
    for (int s = started.load(); s < 3; s = started.load()) started.wait(s);
  });
  EXPECT_EQ(few, (std::set<int>{0, 1, 2}));
}

TEST(ParallelFor, StopsHandingOutWorkAfterAFailure) {
  std::vector<size_t> ran;
  try {
    parallel_for(100, 1, [&](size_t i) {
      ran.push_back(i);
      if (i == 10) throw_input("item 10 is bad");
    });
    FAIL() << "no exception";
  } catch (const Error& e) {
    // The exception itself arrives on the calling thread: type, kind and message intact.
    EXPECT_EQ(e.kind(), ErrorKind::input);
    EXPECT_EQ(std::string(e.what()), "item 10 is bad");
  }
  ASSERT_EQ(ran.size(), 11u);
  EXPECT_EQ(ran.back(), 10u);
}

TEST(ParallelFor, TheLowestFailingIndexWinsNotTheFirstInTime) {
  // Two threads. Index 3 waits until index 7 is about to throw, then throws itself: 7 fails first
  // in time, yet 3's exception is the one reported (a sequential loop stops at 3). 3 is handed out
  // before 7, so while one thread waits in 3 the other runs 4..7; after the failures nothing
  // above 7 starts.
  std::atomic<bool> seven_failing{false};
  std::vector<std::atomic<int>> ran(20);
  try {
    parallel_for(20, 2, [&](size_t i) {
      ++ran[i];
      if (i == 3) {
        seven_failing.wait(false);
        throw std::out_of_range("three");
      }
      if (i == 7) {
        seven_failing = true;
        seven_failing.notify_all();
        throw std::invalid_argument("seven");
      }
    });
    FAIL() << "no exception";
  } catch (const std::out_of_range& e) {
    EXPECT_EQ(std::string(e.what()), "three");
  }
  for (size_t i = 0; i < 20; ++i) EXPECT_EQ(ran[i].load(), i <= 7 ? 1 : 0) << i;
}

TEST(ParallelFor, EveryIndexBelowAFailureStillRuns) {
  // With many threads the failing index may throw before lower ones have finished: they all
  // finish anyway, so the side effects below the failure are the sequential loop's.
  std::vector<std::atomic<int>> ran(64);
  EXPECT_THROW(parallel_for(64, 8,
                            [&](size_t i) {
                              if (i == 40) throw std::runtime_error("forty");
                              ++ran[i];
                            }),
               std::runtime_error);
  for (size_t i = 0; i < 40; ++i) EXPECT_EQ(ran[i].load(), 1) << i;
}

}  // namespace
}  // namespace crest
