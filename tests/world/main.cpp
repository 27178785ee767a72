// The main of the tests that run as one MPI job (the spatial split's, the pipeline stages'): they
// run under `mpirun -np N` (tests/CMakeLists.txt), every rank the same tests on its own part. The
// job fails when any rank has a failure, so a wrong result on one rank is never hidden by another's
// exit code.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>

#include "world.hpp"

namespace crest::test {
namespace {
std::unique_ptr<Communicator> the_world;
}  // namespace
Communicator& world() { return *the_world; }
}  // namespace crest::test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // A rank whose neighbour failed and left the exchange fails within a minute instead of hanging
  // (CREST_SPATIAL_TEST_TIMEOUT_S: shorter, for the test of that very failure).
  const char* timeout = std::getenv("CREST_SPATIAL_TEST_TIMEOUT_S");
  crest::test::the_world = crest::make_world_communicator(
      {.backend = "auto", .timeout_s = timeout ? std::atof(timeout) : 60.0});
  double failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  crest::test::the_world->allreduce_sum(&failed, 1);
  crest::test::the_world.reset();
  return failed > 0 ? 1 : 0;
}
