#include "onednn/tap_window.hpp"

namespace crest::onednn {

namespace {

// Whether tap `k` reads the input for some output position: the first output o >= 0 whose read
// o*stride - pad_lo + k*dilation is >= 0 must exist and read below `in`.
bool tap_reads_input(int64_t k, int64_t in, int64_t out, int64_t stride, int64_t dilation,
                     int64_t pad_lo) {
  const int64_t offset = k * dilation - pad_lo;  // the read of output 0
  const int64_t first_out = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  return first_out < out && first_out * stride + offset < in;
}

}  // namespace

TapWindow live_taps(const ConvDesc& d, int axis) {
  const auto a = static_cast<size_t>(axis);
  const int64_t in = d.in_size[a], out = d.out_size[a], kernel = d.kernel[a];
  const int64_t stride = d.stride[a], dilation = d.dilation[a];
  const TapWindow whole{0, kernel, d.pad_lo[a], d.pad_hi[a]};
  if (in < 1 || out < 1 || kernel < 1 || stride < 1 || dilation < 1) return whole;
  if (out != (in + d.pad_lo[a] + d.pad_hi[a] - dilation * (kernel - 1) - 1) / stride + 1)
    return whole;
  int64_t first = 0, last = kernel - 1;
  while (first < kernel && !tap_reads_input(first, in, out, stride, dilation, d.pad_lo[a])) ++first;
  if (first == kernel) return whole;  // nothing reads the input: nothing to gain
  while (!tap_reads_input(last, in, out, stride, dilation, d.pad_lo[a])) --last;
  // Dropping taps from the front shifts every read right by `first` dilations; dropping them
  // from the back leaves the output size unchanged only with that much less right padding.
  const TapWindow w{first, last - first + 1, d.pad_lo[a] - first * dilation,
                    d.pad_hi[a] - (kernel - 1 - last) * dilation};
  return w.pad_lo >= 0 && w.pad_hi >= 0 ? w : whole;
}

}  // namespace crest::onednn
