// The kernel taps of a convolution that ever read the input. A tap whose every read lands in the
// padding contributes nothing forward, receives a zero weight gradient and passes nothing back,
// so the kernels can skip it. The case in point is DeepCAM's ASPP at reduced resolution: at
// 192x288 its feature map is 12x18, and the dilations 24 and 36 put all eight outer taps of the
// 3x3 kernels in the padding, so 8/9 of those convolutions' arithmetic multiplies zeros.
#pragma once
#include <cstdint>

#include "crest/backends/kernels.hpp"

namespace crest::onednn {

// Taps [first, first + count) along one spatial axis, with the paddings that keep the output
// size when only they remain.
struct TapWindow {
  int64_t first = 0, count = 0;
  int64_t pad_lo = 0, pad_hi = 0;
  bool trimmed(int64_t kernel) const { return count < kernel; }
};

// The window of axis `axis` of convolution `d` (not transposed): the dead taps at either end are
// dropped, dead taps inside stay (with a stride they can alternate with live ones). The whole
// kernel is returned when the geometry is inconsistent (the primitive reports that) or when a
// trimmed padding would be negative.
TapWindow live_taps(const ConvDesc& d, int axis);

}  // namespace crest::onednn
