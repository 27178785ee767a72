// An in-process BatchStatReducer group for tests of synchronised batch norm: `size` executors,
// one per thread, run their steps at the same time, and each allreduce_sum waits for every rank's
// call, sums the ranks' arrays in rank order (the same bits everywhere) and hands every rank the
// sum. Like the real communicators, all ranks must make the same calls in the same order.
#pragma once
#include <barrier>
#include <cstddef>
#include <vector>

#include "crest/backends/batch_stat_reducer.hpp"

namespace crest::test {

class LockstepGroup {
 public:
  explicit LockstepGroup(int size) : barrier_(size), arrays_(static_cast<size_t>(size)) {
    for (int r = 0; r < size; ++r) ranks_.emplace_back(*this, r);
  }
  LockstepGroup(const LockstepGroup&) = delete;
  LockstepGroup& operator=(const LockstepGroup&) = delete;

  // The reducer rank `r`'s executor uses.
  BatchStatReducer& rank(int r) { return ranks_[static_cast<size_t>(r)]; }
  int calls() const { return calls_; }  // allreduce_sum calls of rank 0

 private:
  class Rank final : public BatchStatReducer {
   public:
    Rank(LockstepGroup& g, int r) : group_(g), rank_(r) {}
    void allreduce_sum(double* data, size_t n) override { group_.sum(rank_, data, n); }

   private:
    LockstepGroup& group_;
    int rank_;
  };

  void sum(int rank, double* data, size_t n) {
    arrays_[static_cast<size_t>(rank)] = data;
    barrier_.arrive_and_wait();  // every rank's array is in place
    std::vector<double> total(n, 0.0);
    for (double* a : arrays_)
      for (size_t i = 0; i < n; ++i) total[i] += a[i];
    barrier_.arrive_and_wait();  // every rank has read every array
    for (size_t i = 0; i < n; ++i) data[i] = total[i];
    if (rank == 0) ++calls_;
  }

  std::barrier<> barrier_;
  std::vector<double*> arrays_;
  std::vector<Rank> ranks_;
  int calls_ = 0;
};

}  // namespace crest::test
