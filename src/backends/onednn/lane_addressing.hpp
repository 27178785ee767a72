// Where the 16-channel lane blocks of a 2-D (or 3-D) activation lie, for crest's own loops over
// oneDNN's blocked layout (nChw16c, nCdhw16c) or channels-last: in both, the 16 channels of a block
// are contiguous at every pixel, so one loop body reads either layout without a reorder.
#pragma once
#include <cstdint>

#include "crest/backends/kernels.hpp"
#include "onednn/lanes.hpp"

namespace crest::onednn {

// Sample n's lane block b starts at n * sample + b * block; its pixel (y, x) lies
// (y * width + x) * pixel further on.
struct Addressing {
  int64_t sample = 0, block = 0, pixel = 0;
  int64_t height = 0, width = 0;

  int64_t at(int64_t n, int64_t b, int64_t y, int64_t x) const {
    return n * sample + b * block + (y * width + x) * pixel;
  }
};

inline Addressing addressing(bool blocked, int64_t channels, int64_t height, int64_t width) {
  constexpr int64_t kLanes = lanes::kLanes;
  if (blocked) return {channels * height * width, kLanes * height * width, kLanes, height, width};
  return {height * width * channels, kLanes, channels, height, width};  // channels-last
}

// The layout crest's lane loops read and write a 2-D activation (shape N, C, H, W) or a 3-D one
// (N, C, D, H, W: its depth folded into the rows, voxel (z, y, x) at row z * H + y) in, and where
// its blocks lie: oneDNN's nChw16c where oneDNN blocks by 16 (AVX-512: the batch norms and ReLUs
// around the kernel deliver it, so no reorder) and the channels fill whole blocks, unless the
// activations are bf16 on AMX (whose kernels keep them channels-last), else channels-last, whose 16
// channels of a block are contiguous as well (a last block of fewer channels ends where the next
// pixel starts: lanes::load_first and store_first).
struct LaneLayout {
  MemFormat format;
  Addressing addressing;
};
LaneLayout lane_layout(const Shape& shape, DType dtype);

}  // namespace crest::onednn
