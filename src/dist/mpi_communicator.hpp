// The MPI implementation of Communicator (src/dist, internal): only world.cpp creates it.
#pragma once
#include <cstdint>
#include <memory>

#include "crest/dist/communicator.hpp"

namespace crest::dist_detail {

// Initialises MPI (once per process; MPI_Finalize runs at exit) and returns MPI_COMM_WORLD as a
// Communicator whose collectives run on one communication thread with a `timeout_s` watchdog.
std::unique_ptr<Communicator> make_mpi_world(double timeout_s);
// A duplicate of the communicator whose Fortran handle is `fortran_handle` (initialising MPI if
// the caller has not), run the same way; throws crest::Error (usage) for an invalid handle.
std::unique_ptr<Communicator> make_mpi_communicator(int64_t fortran_handle, double timeout_s);
// MPI_Abort on MPI_COMM_WORLD when MPI is initialised, not finalised and the job has >1 rank.
void mpi_abort_if_parallel(int exit_code);

}  // namespace crest::dist_detail
