// Which process world a run lives in: one process, or the MPI job a launcher started.
#include <cstdlib>
#include <string>

#include "crest/core/error.hpp"
#include "crest/dist/communicator.hpp"
#include "mpi_communicator.hpp"

namespace crest {
namespace {

// The job size a launcher announces, or 0. Read before MPI_Init: these variables are the only
// way to know whether initialising MPI is wanted (a plain `crest train` must start in
// milliseconds and never try to reach a process manager).
int announced_job_size() {
  // Open MPI's mpirun, MPICH/Hydra and Slurm's PMI, PMIx (srun --mpi=pmix, prterun), IBM
  // jsrun (Summit), Flux.
  for (const char* var :
       {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "JSM_NAMESPACE_SIZE", "FLUX_JOB_SIZE"}) {
    if (const char* v = std::getenv(var)) {
      const int n = std::atoi(v);
      if (n > 0) return n;
    }
  }
  if (std::getenv("PMIX_RANK") || std::getenv("PMI_RANK")) return 1;  // size unknown, but launched
  return 0;
}

}  // namespace

bool launched_as_parallel_job() { return announced_job_size() > 0; }

std::unique_ptr<Communicator> make_world_communicator(const WorldOptions& options) {
  if (!(options.timeout_s > 0)) throw_usage("dist.timeout_s must be positive");
  if (options.backend == "single") {
    if (announced_job_size() > 1)
      throw_input("dist.backend is 'single' but a launcher started this process as one of " +
                  std::to_string(announced_job_size()) +
                  " ranks: every rank would train alone and write the same outputs (use "
                  "dist.backend: auto or mpi)");
    return make_single_process_communicator();
  }
  if (options.backend == "mpi" || (options.backend == "auto" && launched_as_parallel_job()))
    return dist_detail::make_mpi_world(options.timeout_s);
  if (options.backend != "auto")
    throw_usage("dist.backend: unknown value '" + options.backend +
                "' (expected auto, mpi or single)");
  return make_single_process_communicator();
}

std::unique_ptr<Communicator> communicator_from_mpi_handle(int64_t fortran_handle,
                                                           double timeout_s) {
  if (!(timeout_s > 0)) throw_usage("dist.timeout_s must be positive");
  return dist_detail::make_mpi_communicator(fortran_handle, timeout_s);
}

void abort_parallel_job(int exit_code) { dist_detail::mpi_abort_if_parallel(exit_code); }

}  // namespace crest
