// Communicator: the process world a run lives in (DESIGN.md "Distribution"). Everything that
// depends on rank or size — data sharding, staging, metric reduction, gradient allreduce — talks
// to this interface, so one process and an MPI job run the same code. The single-process
// implementation lives here; the MPI (and later NCCL) implementations plug in behind it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace crest {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual std::string name() const = 0;  // "single", "mpi", ...
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Rank and size among the processes on this node (shared memory): node-local staging and
  // thread counts depend on them.
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;

  virtual void barrier() = 0;
  // In-place sums over all ranks, identical results everywhere (metrics are reduced as sums and
  // counts, never as means of means).
  virtual void allreduce_sum(double* values, size_t n) = 0;
  virtual void allreduce_sum(int64_t* values, size_t n) = 0;
  // Rank `root`'s bytes replace everyone's; all ranks pass the same size.
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  // Every rank contributes `mine`; all ranks receive the concatenation in rank order.
  virtual std::vector<std::byte> allgatherv(const std::vector<std::byte>& mine) = 0;
};

// One process: rank 0 of 1. Collectives are identities.
std::unique_ptr<Communicator> make_single_process_communicator();

}  // namespace crest
