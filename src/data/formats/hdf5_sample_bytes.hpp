// Where a DeepCAM sample lies in the reader's shared memory (private to src/data/formats): the
// float32 data (H*W*C) at offset 0, then the int32 labels (H*W). crest and its reader process
// compute it alike from the shape crest expects.
#pragma once
#include <cstddef>
#include <string>

#include "crest/core/error.hpp"
#include "crest/data/formats/hdf5.hpp"

namespace crest {

struct SampleBytes {
  size_t data = 0;
  size_t labels = 0;
  size_t total = 0;  // 0 for a shape with a dimension <= 0 (no file has one: the read refuses it)
};

inline SampleBytes sample_bytes(const std::string& path, const DeepcamSampleShape& s) {
  if (s.height <= 0 || s.width <= 0 || s.channels <= 0) return {};
  size_t pixels = 0, data = 0, labels = 0, total = 0;
  if (__builtin_mul_overflow(static_cast<size_t>(s.height), static_cast<size_t>(s.width),
                             &pixels) ||
      __builtin_mul_overflow(pixels, static_cast<size_t>(s.channels) * 4, &data) ||
      __builtin_mul_overflow(pixels, size_t{4}, &labels) ||
      __builtin_add_overflow(data, labels, &total))
    throw_input(path + ": a sample of " + s.str() + " is too large to read");
  return {data, labels, total};
}

// The floats of `window` of a sample (its data only), refusing a window that is empty or outside
// the sample before anything is allocated or mapped.
inline size_t block_bytes(const std::string& path, const DeepcamSampleShape& s,
                          const DeepcamWindow& w) {
  if (w.h0 < 0 || w.h1 <= w.h0 || w.h1 > s.height || w.w0 < 0 || w.w1 <= w.w0 || w.w1 > s.width ||
      s.channels <= 0)
    throw_input(path + ": " + w.str() + " is not a block of a sample of " + s.str());
  return sample_bytes(path, {w.h1 - w.h0, w.w1 - w.w0, s.channels}).data;
}

}  // namespace crest
