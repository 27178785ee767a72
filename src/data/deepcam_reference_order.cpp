#include "crest/data/deepcam_reference_order.hpp"

#include <numeric>

#include "crest/core/error.hpp"
#include "crest/data/numpy_shuffle.hpp"
#include "crest/data/torch_randperm.hpp"

namespace crest {

std::vector<int64_t> deepcam_reference_file_order(int64_t n) {
  CREST_CHECK(n >= 0, "sample count");
  std::vector<int64_t> files(static_cast<size_t>(n));
  std::iota(files.begin(), files.end(), int64_t{0});
  numpy_legacy_shuffle(files, kDeepcamFileShuffleSeed);
  return files;
}

std::vector<int64_t> deepcam_reference_epoch_order(int64_t n, uint64_t sampler_seed, int epoch) {
  CREST_CHECK(epoch >= 0, "epoch");
  // The shuffle is recomputed each epoch: O(n) draws, nothing beside a 121266-file epoch.
  const std::vector<int64_t> files = deepcam_reference_file_order(n);
  std::vector<int64_t> order = torch_randperm(n, sampler_seed + static_cast<uint64_t>(epoch));
  for (auto& index : order) index = files[static_cast<size_t>(index)];
  return order;
}

}  // namespace crest
