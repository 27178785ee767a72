// The process world of the spatial tests (tests/spatial/main.cpp): the MPI job mpirun started,
// or one process.
#pragma once
#include "crest/dist/communicator.hpp"

namespace crest::test {
Communicator& world();
}  // namespace crest::test
