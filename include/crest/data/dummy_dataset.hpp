// The reference's "dummy" dataset: a fixed set of random samples of the configured shape,
// generated on the fly from (seed, sample index) so any number of samples costs no memory and
// every epoch sees the same data.
#pragma once
#include <cstdint>
#include <vector>

#include "crest/core/shape.hpp"
#include "crest/core/tensor.hpp"
#include "crest/data/sharding.hpp"  // epoch_order, used with this dataset

namespace crest {

class DummyDataset {
 public:
  // sample_shape is [D, H, W, C] (channels last, as the files); targets have target_size values.
  DummyDataset(const Shape& sample_shape, int64_t target_size, int64_t n_samples, uint64_t seed);

  int64_t size() const { return n_; }
  // Writes samples `indices` into x (channels-last [N, D, H, W, C] storage: uniform [0, 1)) and
  // y ([N, target_size]: uniform [-1, 1)). Parallel over elements; deterministic.
  void fill_batch(const std::vector<int64_t>& indices, const TensorView& x,
                  const TensorView& y) const;

 private:
  Shape sample_shape_;
  int64_t target_size_, n_;
  uint64_t seed_;
};

}  // namespace crest

#include <memory>

#include "crest/data/sample_source.hpp"

namespace crest {

// The dummy dataset as a SampleSource, so `data.name: dummy` runs through the same loader
// (threads, prefetch, data-wait accounting) as files do. Samples have no payload to read.
std::shared_ptr<SampleSource> make_dummy_source(const Shape& sample_shape, int64_t target_size,
                                                int64_t n_samples, uint64_t seed);

}  // namespace crest
