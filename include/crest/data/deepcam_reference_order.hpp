// The DeepCAM reference's training order (mlcommons/hpc deepcam/src/deepCam: data/__init__.py,
// data/cam_hdf5_dataset.py, train.py), sample for sample, so that data.train_order: reference
// trains on the same files per rank, epoch and step as the reference:
//  1. CamDataset sorts the split's file names and shuffles the list once with
//     np.random.RandomState(12345) (a fixed seed, not --seed);
//  2. DistributedSampler(shuffle=True, drop_last=True, seed=0), after set_epoch(epoch) with the
//     0-based epoch (train.py counts from the resumed start_epoch), permutes the dataset's
//     indices with torch.randperm(n, generator=manual_seed(seed + epoch)).
// So epoch e's order of the sorted list is order[i] = shuffled[randperm(n, seed + e)[i]]. The
// sampler's sharding (the first floor(n / ranks)·ranks positions, rank r taking r, r + ranks,
// ...) and the DataLoader's drop_last batches are crest's rank_samples and ShardPlan already.
#pragma once
#include <cstdint>
#include <vector>

namespace crest {

inline constexpr uint32_t kDeepcamFileShuffleSeed = 12345;  // CamDataset's RandomState seed
inline constexpr uint64_t kDeepcamSamplerSeed = 0;          // DistributedSampler's default

// The sorted indices of n files in the order of CamDataset's one shuffle.
std::vector<int64_t> deepcam_reference_file_order(int64_t n);

// Epoch `epoch`'s order of n sorted samples as the reference's sampler draws it with seed
// `sampler_seed` (kDeepcamSamplerSeed in the reference).
std::vector<int64_t> deepcam_reference_epoch_order(int64_t n, uint64_t sampler_seed, int epoch);

}  // namespace crest
