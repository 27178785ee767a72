// One sample of a source read and decoded with a draw, as the loader does it: what the image
// source tests compare.
#pragma once
#include <cstdint>
#include <vector>

#include "crest/data/sample_source.hpp"

namespace crest::test {

inline std::vector<float> drawn_sample(const SampleSource& s, int64_t i, const SampleDraw& draw,
                                       int32_t* label) {
  std::vector<std::byte> payload;
  s.read(i, payload);
  std::vector<float> x(static_cast<size_t>(s.spec().x_shape.numel()));
  s.decode_drawn(i, payload, x.data(), label, draw);
  return x;
}

}  // namespace crest::test
