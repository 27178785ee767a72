// Point-to-point messages of the single-process communicator (messages to itself, the form a
// one-process `crest search` would use); the MPI ones are exercised across processes by
// tests/mpi/search_mpi_test.cpp.
#include <gtest/gtest.h>

#include "crest/core/error.hpp"
#include "crest/dist/communicator.hpp"

namespace crest {
namespace {

std::vector<std::byte> bytes_of(const std::string& s) {
  std::vector<std::byte> b;
  for (char c : s) b.push_back(static_cast<std::byte>(c));
  return b;
}

TEST(PointToPoint, MessagesToItselfArriveByTagInOrder) {
  auto comm = make_single_process_communicator();
  EXPECT_FALSE(comm->try_receive(Communicator::kAnySource, 1).has_value());
  comm->send(0, 1, bytes_of("first"));
  comm->send(0, 2, bytes_of("other tag"));
  comm->send(0, 1, bytes_of("second"));
  const auto a = comm->try_receive(Communicator::kAnySource, 1);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->bytes, bytes_of("first"));
  EXPECT_EQ(a->source, 0);
  EXPECT_EQ(comm->receive(0, 1, 1.0, "test").bytes, bytes_of("second"));
  EXPECT_EQ(comm->receive(0, 2, 1.0, "test").bytes, bytes_of("other tag"));
  EXPECT_FALSE(comm->try_receive(0, 1).has_value());
}

TEST(PointToPoint, AWaitWithoutAMessageEndsAtItsDeadlineNamingWhatItWaitedFor) {
  auto comm = make_single_process_communicator();
  try {
    comm->receive(0, 3, 0.05, "the scheduler's answer");
    FAIL() << "no message was sent";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the scheduler's answer: no message"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(comm->send(1, 1, bytes_of("x")), Error);
}

}  // namespace
}  // namespace crest
