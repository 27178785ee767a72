// Which samples each rank reads in an epoch. The reference recipe: the sorted file list is
// permuted each epoch from (seed, epoch) — the same permutation on every rank — and rank r takes
// positions r, r + size, r + 2·size, ... Every rank runs the same number of full batches (the
// collectives of a step must match), so the remainder of an epoch is dropped, as the reference's
// drop_remainder does; the dropped samples change from epoch to epoch with the permutation.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace crest {

struct ShardPlan {
  int64_t samples = 0;     // in the split
  int64_t batch_size = 0;  // per rank
  int rank = 0, size = 1;
  int64_t per_rank = 0;  // samples this rank's stride covers: floor(samples / size)
  int64_t batches = 0;   // full batches per epoch, equal on every rank
  int64_t used_per_rank() const { return batches * batch_size; }
  // Samples of the split not trained on in an epoch (all ranks together).
  int64_t dropped_per_epoch() const { return samples - used_per_rank() * size; }
  std::string describe() const;  // one line for the log, says what is dropped
};

// Throws crest::Error (input) when not even one batch per rank fits, naming the counts.
ShardPlan plan_shards(int64_t samples, int64_t batch_size, int rank, int size);

// Per-epoch order of n samples: sorted when shuffle is false, else a permutation determined by
// (seed, epoch) alone — identical on every rank and machine.
std::vector<int64_t> epoch_order(int64_t n, bool shuffle, uint64_t seed, int epoch);

// This rank's samples of the epoch in consumption order: its stride of the epoch order, the
// first plan.used_per_rank() of them trained on, the rest (at most size - 1 + batch_size - 1)
// the rank's spare samples for the epoch.
std::vector<int64_t> rank_samples(const ShardPlan& plan, const std::vector<int64_t>& order);

}  // namespace crest
