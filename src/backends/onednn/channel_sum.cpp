// Per-channel sums in oneDNN's activation layouts (ChannelLayout). oneDNN 3.2's reduction
// primitive has only its reference code for this shape of reduction (1.6-1.8 s for a
// 2x32x64^3 tensor, measured), so it is an OpenMP loop: each thread sums its share of positions
// into its own row of double accumulators, then the rows are added. bf16 tensors (the output
// gradient of a mixed-precision convolution) are widened as they are read; their sums are
// float32, as the bias gradient they become.
#include "onednn/channel_sum.hpp"

#include <omp.h>

#include <algorithm>
#include <vector>

#include "crest/backends/channel_sum_kernel.hpp"
#include "crest/core/bf16.hpp"
#include "onednn/channel_layout.hpp"
#include "onednn/format.hpp"

namespace crest::onednn {
namespace {

inline double widened(float v) { return static_cast<double>(v); }
inline double widened(uint16_t bf16) { return static_cast<double>(bf16_to_float(bf16)); }

class OneDnnChannelSum final : public ChannelSumKernel {
 public:
  explicit OneDnnChannelSum(const ChannelLayout& l)
      : l_(l),
        width_(l.blocks() * l.block),
        threads_(omp_get_max_threads()),
        partial_(static_cast<size_t>(threads_ * width_)) {}

  void run(const void* src, void* sums) override {
    if (l_.dtype == dnnl::memory::data_type::bf16)
      run_as(static_cast<const uint16_t*>(src), sums);
    else
      run_as(static_cast<const float*>(src), sums);
  }

 private:
  template <typename T>
  void run_as(const T* x, void* sums_v) {
    std::fill(partial_.begin(), partial_.end(), 0.0);
#pragma omp parallel num_threads(threads_)
    {
      double* acc = partial_.data() + omp_get_thread_num() * width_;
      if (l_.channels_innermost())
        sum_channels_innermost(x, acc);
      else
        sum_channel_blocks(x, acc);
    }
    auto* sums = static_cast<float*>(sums_v);
    for (int64_t c = 0; c < l_.channels; ++c) {
      double s = 0;
      for (int t = 0; t < threads_; ++t) s += partial_[static_cast<size_t>(t * width_ + c)];
      sums[c] = static_cast<float>(s);
    }
  }

  // Called inside the parallel region: the positions are shared out, each thread adds into acc.
  template <typename T>
  void sum_channels_innermost(const T* x, double* acc) const {
    const int64_t c_count = l_.channels;
#pragma omp for collapse(3) schedule(static)
    for (int64_t n = 0; n < l_.n; ++n)
      for (int64_t i = 0; i < l_.size[0]; ++i)
        for (int64_t j = 0; j < l_.size[1]; ++j)
          for (int64_t l = 0; l < l_.size[2]; ++l) {
            const T* p = x + l_.offset(n, 0, i, j, l);
#pragma omp simd
            for (int64_t c = 0; c < c_count; ++c) acc[c] += widened(p[c]);
          }
  }

  template <typename T>
  void sum_channel_blocks(const T* x, double* acc) const {
    const int64_t block = l_.block;
#pragma omp for collapse(3) schedule(static)
    for (int64_t n = 0; n < l_.n; ++n)
      for (int64_t cb = 0; cb < l_.blocks(); ++cb)
        for (int64_t i = 0; i < l_.size[0]; ++i)
          for (int64_t j = 0; j < l_.size[1]; ++j)
            for (int64_t l = 0; l < l_.size[2]; ++l) {
              // The whole block, padding channels of the last one included: their accumulators
              // are never read, and a fixed width keeps the loop vectorised.
              const T* p = x + l_.offset(n, cb, i, j, l);
              double* a = acc + cb * block;
#pragma omp simd
              for (int64_t ci = 0; ci < block; ++ci) a[ci] += widened(p[ci]);
            }
  }

  ChannelLayout l_;
  int64_t width_;  // accumulators per thread: the channels padded to whole blocks
  int threads_;
  std::vector<double> partial_;  // threads_ rows of width_, allocated once
};

std::unique_ptr<ChannelSumKernel> make_registered(Backend&, const ChannelSumDesc& d) {
  return make_channel_sum(d.format);
}

}  // namespace

std::unique_ptr<ChannelSumKernel> make_channel_sum(const MemFormat& format) {
  const dnnl::memory::desc md = to_desc(format);
  const dnnl::memory::data_type t = md.get_data_type();
  if ((t != dnnl::memory::data_type::f32 && t != dnnl::memory::data_type::bf16) ||
      !ChannelLayout::supports(md))
    throw_usage(
        "the onednn channel_sum kernel takes f32 or bf16 [N, C, spatial] tensors, plain, "
        "channels-last or blocked on channels; got " +
        describe(md));
  return std::make_unique<OneDnnChannelSum>(ChannelLayout(md));
}

CREST_REGISTER_KERNEL(onednn_channel_sum, "onednn", ChannelSumKernel, make_registered);

}  // namespace crest::onednn
