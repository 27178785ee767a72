#include "onednn/channel_affine_accumulate.hpp"

#include <algorithm>

#include "crest/core/error.hpp"

namespace crest::onednn {

bool ChannelAffineAccumulate::supports(const dnnl::memory::desc& md) {
  if (md.get_format_kind() != dnnl::memory::format_kind::blocked ||
      md.get_data_type() != dnnl::memory::data_type::f32 || md.get_submemory_offset() != 0)
    return false;
  if (md.get_ndims() < 3 || md.get_ndims() > 5) return false;
  const dnnl::memory::dims idxs = md.get_inner_idxs();
  return idxs.empty() || (idxs.size() == 1 && idxs[0] == 1);
}

ChannelAffineAccumulate::ChannelAffineAccumulate(const dnnl::memory::desc& md) {
  CREST_CHECK(supports(md), "ChannelAffineAccumulate: unsupported layout");
  const dnnl::memory::dims dims = md.get_dims(), strides = md.get_strides();
  const dnnl::memory::dims blks = md.get_inner_blks();
  n_ = dims[0];
  channels_ = dims[1];
  block_ = blks.size() == 1 ? blks[0] : 1;
  stride_n_ = strides[0];
  stride_block_ = strides[1];
  // Spatial dimensions right-aligned, as the reference kernels widen them.
  const size_t spatial = dims.size() - 2;
  for (size_t i = 0; i < spatial; ++i) {
    const size_t u = 3 - spatial + i;
    size_[u] = dims[2 + i];
    stride_[u] = strides[2 + i];
  }
}

void ChannelAffineAccumulate::run(const float* x, const Coefficients& k, float* dst) const {
  // Channels-last: the channels of one position are contiguous, so they are the inner loop.
  if (block_ == 1 && stride_block_ == 1)
    channels_innermost(x, k, dst);
  else
    channel_blocks_outermost(x, k, dst);
}

void ChannelAffineAccumulate::channels_innermost(const float* x, const Coefficients& k,
                                                 float* dst) const {
  const int64_t c_count = channels_;
  const float *center = k.center, *a = k.a, *b = k.b;
#pragma omp parallel for collapse(3) schedule(static)
  for (int64_t n = 0; n < n_; ++n)
    for (int64_t i = 0; i < size_[0]; ++i)
      for (int64_t j = 0; j < size_[1]; ++j)
        for (int64_t l = 0; l < size_[2]; ++l) {
          const int64_t base = n * stride_n_ + i * stride_[0] + j * stride_[1] + l * stride_[2];
#pragma omp simd
          for (int64_t c = 0; c < c_count; ++c)
            dst[base + c] += a[c] * (x[base + c] - center[c]) + b[c];
        }
}

void ChannelAffineAccumulate::channel_blocks_outermost(const float* x, const Coefficients& k,
                                                       float* dst) const {
  const int64_t blocks = (channels_ + block_ - 1) / block_;
  const float *center = k.center, *a = k.a, *b = k.b;
#pragma omp parallel for collapse(3) schedule(static)
  for (int64_t n = 0; n < n_; ++n)
    for (int64_t cb = 0; cb < blocks; ++cb)
      for (int64_t i = 0; i < size_[0]; ++i) {
        const int64_t c0 = cb * block_;
        const int64_t in_block = std::min(block_, channels_ - c0);  // the last block may be short
        for (int64_t j = 0; j < size_[1]; ++j)
          for (int64_t l = 0; l < size_[2]; ++l) {
            const int64_t base = n * stride_n_ + cb * stride_block_ + i * stride_[0] +
                                 j * stride_[1] + l * stride_[2];
#pragma omp simd
            for (int64_t ci = 0; ci < in_block; ++ci)
              dst[base + ci] += a[c0 + ci] * (x[base + ci] - center[c0 + ci]) + b[c0 + ci];
          }
      }
}

}  // namespace crest::onednn
