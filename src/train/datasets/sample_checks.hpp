// Rules several datasets share (their entries' check functions call them).
#pragma once
#include <cstddef>
#include <string>

#include "crest/train/dataset_registry.hpp"

namespace crest::datasets {

// data.sample_shape is given and has `rank` entries, the axes `dims` ("[D, H, W, C]").
void check_sample_shape(const DataSection& r, const DataConfig& d, size_t rank,
                        const std::string& dims);
// CosmoFlow's samples (cosmo, and dummy, its synthetic stand-in): [D, H, W, C], tfrecord or npy,
// n_train given.
void check_cosmoflow_samples(const DataSection& r, const DataConfig& d);

}  // namespace crest::datasets
