// Reference per-channel sums: plain loops over plain or channels-last tensors, float and double
// (sums in double).
#include <algorithm>
#include <vector>

#include "crest/backends/channel_sum_kernel.hpp"
#include "reference/reference_kernels.hpp"

namespace crest::reference {
namespace {

template <typename T>
class ChannelSum final : public ChannelSumKernel {
 public:
  explicit ChannelSum(const ChannelSumDesc& d)
      : n_(d.format.shape[0]),
        channels_(d.format.shape[1]),
        spatial_(d.format.shape.numel() / (n_ * channels_)),
        channels_last_(d.format.layout == Layout::channels_last),
        sums_(static_cast<size_t>(channels_)) {}

  void run(const void* src_v, void* sums_v) override {
    const T* x = static_cast<const T*>(src_v);
    std::vector<double>& sum = sums_;
    std::fill(sum.begin(), sum.end(), 0.0);
    for (int64_t n = 0; n < n_; ++n)
      for (int64_t c = 0; c < channels_; ++c)
        for (int64_t s = 0; s < spatial_; ++s)
          sum[static_cast<size_t>(c)] += static_cast<double>(x[index(n, c, s)]);
    T* out = static_cast<T*>(sums_v);
    for (int64_t c = 0; c < channels_; ++c) out[c] = static_cast<T>(sum[static_cast<size_t>(c)]);
  }

 private:
  int64_t index(int64_t n, int64_t c, int64_t s) const {
    return channels_last_ ? (n * spatial_ + s) * channels_ + c : (n * channels_ + c) * spatial_ + s;
  }

  int64_t n_, channels_, spatial_;
  bool channels_last_;
  std::vector<double> sums_;  // allocated once: a step allocates nothing
};

std::unique_ptr<ChannelSumKernel> make_channel_sum(Backend&, const ChannelSumDesc& d) {
  require_float_dtype(d.format.dtype, "channel_sum");
  if (d.format.layout == Layout::blocked || d.format.shape.rank() < 2)
    throw_usage(
        "the reference channel_sum kernel takes plain or channels-last tensors of rank "
        ">= 2, got " +
        d.format.str());
  if (d.format.dtype == DType::f64) return std::make_unique<ChannelSum<double>>(d);
  return std::make_unique<ChannelSum<float>>(d);
}

}  // namespace

CREST_REGISTER_KERNEL(reference_channel_sum, "reference", ChannelSumKernel, make_channel_sum);

}  // namespace crest::reference
