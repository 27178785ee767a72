// Synthetic DeepCAM samples that a segmentation network can learn from: 16 climate channels with
// a smooth, physically correlated large-scale background, plus tropical-cyclone-like vortices
// (class 1) and atmospheric-river-like moisture filaments (class 2) whose pixels are labelled.
// docs/synthetic-data.md has the model and the measured class frequencies.
//
// A sample is a pure function of (seed, index): the same bytes for any OpenMP thread count, and
// any sample can be made without the ones before it.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

namespace crest {

struct DeepcamSampleSpec {
  int64_t height = 768;   // latitude rows, north pole first
  int64_t width = 1152;   // longitude columns, periodic
  int64_t channels = 16;  // must be 16: the channel recipes are per named variable
};

// Per-channel statistics the background is scaled to (mean, std) and clipped to (min, max),
// in the order of kDeepcamChannelNames.
struct DeepcamChannelStats {
  std::vector<float> minval, maxval, mean, std;
};

inline constexpr std::array<const char*, 16> kDeepcamChannelNames = {
    "TMQ",  "U850", "V850",  "UBOT", "VBOT",   "QREFHT", "PS",   "PSL",
    "T200", "T500", "PRECT", "TS",   "TREFHT", "Z1000",  "Z200", "ZBOT"};

// Pixel fractions of background, cyclone and river in the real training set (reference/SPEC.md);
// the generator's feature counts aim at these.
inline constexpr std::array<double, 3> kDeepcamClassFrequencies = {
    0.986267818390377, 0.0004578708870701058, 0.01327431072255291};

// The real training-set statistics (deepcam_stats.h5), with a climatological PSL std where the
// file's float32 sqmean - mean^2 is negative.
DeepcamChannelStats default_deepcam_channel_stats();

// Writes data [height, width, channels] (C order, channels last) and labels [height, width]
// holding 0 (background), 1 (cyclone) or 2 (river) as float, as in the files.
void generate_deepcam_sample(uint64_t seed, int64_t index, const DeepcamSampleSpec& spec,
                             const DeepcamChannelStats& stats, float* data, float* labels);

}  // namespace crest
