// Communicator::start_arrival under mpirun: the gradient lag queues it before its buckets, so that
// they start with every rank there; it must not complete on any rank before the last rank has
// started it.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "world.hpp"

namespace crest::test {
namespace {

constexpr int kGoTag = 0x7e57c01;

TEST(WorldArrival, CompletesOnlyOnceEveryRankHasStartedIt) {
  Communicator& comm = world();
  // Rank 0 lets the others go and starts its arrival; they start theirs a little later (the
  // pause only makes an arrival that does not wait fail surely; a correct one passes without
  // it), each noting when. An arrival holds the communication thread, so the go goes first.
  std::unique_ptr<PendingCollective> arrival;
  double started = 0;
  if (comm.rank() == 0) {
    for (int r = 1; r < comm.size(); ++r) comm.send(r, kGoTag, {});
    arrival = comm.start_arrival("test arrival");
  } else {
    comm.receive(0, kGoTag, 60, "rank 0's go");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    started = steady_seconds();
    arrival = comm.start_arrival("test arrival");
  }
  arrival->wait();
  const double done = arrival->timing().done;
  std::vector<std::byte> mine(sizeof started);
  std::memcpy(mine.data(), &started, sizeof started);
  double last_start = 0;
  for (const auto& part : comm.allgather_parts(mine)) {
    double s = 0;
    std::memcpy(&s, part.data(), sizeof s);
    last_start = std::max(last_start, s);
  }
  // One clock for every rank of one node (steady_clock); the job runs on one.
  EXPECT_GE(done, last_start) << "rank " << comm.rank()
                              << "'s arrival completed before every rank had started it";
  // A second arrival right away: every rank is there, and it completes.
  comm.start_arrival("test arrival again")->wait();
}

}  // namespace
}  // namespace crest::test
