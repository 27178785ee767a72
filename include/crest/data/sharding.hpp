// Which samples each rank reads in an epoch. The reference recipe: the sorted file list is
// permuted each epoch from (seed, epoch) — the same permutation on every rank — and rank r takes
// positions r, r + size, r + 2·size, ... Every rank runs the same number of full batches (the
// collectives of a step must match), so the remainder of an epoch is dropped, as the reference's
// drop_remainder does; the dropped samples change from epoch to epoch with the permutation.
//
// Every-sample plans (DeepCAM's validation, which has no collective per step) drop nothing: as
// the DeepCAM reference's validation reader, rank r takes the contiguous block
// [r·q, (r+1)·q) of the order (q = floor(n / size)) plus position size·q + r when that exists,
// and its last batch may be partial; ranks may run different batch counts.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace crest {

struct ShardPlan {
  int64_t samples = 0;     // in the split
  int64_t batch_size = 0;  // per rank
  int rank = 0, size = 1;
  bool every_sample = false;  // nothing dropped: the last batch may be partial
  // Samples this rank's share covers: floor(samples / size), or (every sample) that plus one of
  // the remainder for the first samples % size ranks.
  int64_t per_rank = 0;
  // Batches per epoch: full ones, equal on every rank; every sample: ceil(per_rank / batch_size)
  // on this rank.
  int64_t batches = 0;
  int64_t used_per_rank() const { return every_sample ? per_rank : batches * batch_size; }
  // Samples of the split not read in an epoch (all ranks together).
  int64_t dropped_per_epoch() const { return every_sample ? 0 : samples - used_per_rank() * size; }
  // Samples read in an epoch, all ranks together.
  int64_t samples_per_epoch() const { return samples - dropped_per_epoch(); }
  std::string describe() const;  // one line for the log, says what is dropped
};

// Throws crest::Error (input) when not even one batch per rank fits (unless every_sample, which
// needs only one sample in the split), naming the counts.
ShardPlan plan_shards(int64_t samples, int64_t batch_size, int rank, int size,
                      bool every_sample = false);

// Which permutation orders a training epoch (data.train_order): crest's own, from
// (data.seed, epoch) by epoch_order below, or the DeepCAM reference's, which reproduces the
// reference's sample sequence per rank and epoch (deepcam_reference_order.hpp).
enum class TrainOrder { crest, reference };

// Per-epoch order of n samples: sorted when shuffle is false, else a permutation determined by
// (seed, epoch) alone — identical on every rank and machine.
std::vector<int64_t> epoch_order(int64_t n, bool shuffle, uint64_t seed, int epoch);

// This rank's samples of the epoch in consumption order: its stride of the epoch order, the
// first plan.used_per_rank() of them trained on, the rest (at most size - 1 + batch_size - 1)
// the rank's spare samples for the epoch. Every-sample plans: its block and remainder sample,
// no spares.
std::vector<int64_t> rank_samples(const ShardPlan& plan, const std::vector<int64_t>& order);

}  // namespace crest
