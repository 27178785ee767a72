#include "crest/data/sharding.hpp"

#include <numeric>
#include <random>

#include "crest/core/error.hpp"
#include "crest/core/hash_rng.hpp"

namespace crest {

std::string ShardPlan::describe() const {
  std::string s = std::to_string(samples) + " samples";
  if (size > 1)
    s += ", rank " + std::to_string(rank) + " of " + std::to_string(size) + " reads " +
         std::to_string(per_rank);
  s += ": " + std::to_string(batches) + " batches of " + std::to_string(batch_size) +
       (size > 1 ? " per rank" : "");
  if (every_sample)
    return s + (per_rank % batch_size ? " (the last one partial)" : "") + "; every sample is read";
  const int64_t dropped = dropped_per_epoch();
  if (dropped > 0)
    s += "; the last " + std::to_string(dropped) +
         " samples of each epoch's order are dropped (drop remainder: every rank runs full, equal "
         "batches)";
  return s;
}

ShardPlan plan_shards(int64_t samples, int64_t batch_size, int rank, int size, bool every_sample) {
  if (size < 1 || rank < 0 || rank >= size)
    throw_runtime("internal error: rank " + std::to_string(rank) + " of " + std::to_string(size));
  if (batch_size < 1) throw_input("data.batch_size must be at least 1");
  ShardPlan p;
  p.samples = samples;
  p.batch_size = batch_size;
  p.rank = rank;
  p.size = size;
  p.every_sample = every_sample;
  p.per_rank = samples / size;
  if (every_sample) {
    if (samples < 1) throw_input("no sample to read");
    p.per_rank += rank < samples % size ? 1 : 0;
    p.batches = (p.per_rank + batch_size - 1) / batch_size;
    return p;
  }
  p.batches = p.per_rank / batch_size;
  if (p.batches < 1)
    throw_input(std::to_string(samples) + " samples cannot give every one of " +
                std::to_string(size) + " ranks a full batch of " + std::to_string(batch_size) +
                " (need at least " + std::to_string(batch_size * size) + ")");
  return p;
}

std::vector<int64_t> epoch_order(int64_t n, bool shuffle, uint64_t seed, int epoch) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  if (!shuffle) return order;
  // Fisher-Yates with our own bounded draws: std::shuffle's distribution use is
  // implementation-defined, and the order must not depend on the standard library.
  std::mt19937_64 g(rng::splitmix64(seed * rng::kGoldenGamma + static_cast<uint64_t>(epoch) + 1));
  for (size_t i = order.size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(g() % i);
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

std::vector<int64_t> rank_samples(const ShardPlan& plan, const std::vector<int64_t>& order) {
  CREST_CHECK(static_cast<int64_t>(order.size()) == plan.samples, "epoch order size");
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(plan.samples / plan.size + 1));
  if (plan.every_sample) {
    const int64_t block = plan.samples / plan.size, first = plan.rank * block;
    for (int64_t i = first; i < first + block; ++i) mine.push_back(order[static_cast<size_t>(i)]);
    const int64_t rest = block * plan.size + plan.rank;
    if (rest < plan.samples) mine.push_back(order[static_cast<size_t>(rest)]);
    return mine;
  }
  for (int64_t i = plan.rank; i < plan.samples; i += plan.size)
    mine.push_back(order[static_cast<size_t>(i)]);
  return mine;
}

}  // namespace crest
