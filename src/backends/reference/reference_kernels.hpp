// Private to the reference backend: the per-family kernel factories (one .cpp each) and the small
// index helpers they share.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "crest/backends/batch_norm_kernel.hpp"
#include "crest/backends/channel_affine_kernel.hpp"
#include "crest/backends/expand_kernel.hpp"
#include "crest/backends/kernels.hpp"
#include "crest/core/error.hpp"

namespace crest::reference {

// Factories. Each validates its descriptor and throws crest::Error (input) naming the problem.
std::unique_ptr<ConvKernel> make_conv(const ConvDesc& d);
std::unique_ptr<PoolKernel> make_pool(const PoolDesc& d);
std::unique_ptr<EltwiseKernel> make_eltwise(const EltwiseDesc& d, const MemFormat& f);
std::unique_ptr<DenseKernel> make_dense(const DenseDesc& d);
std::unique_ptr<ReorderKernel> make_reorder(const MemFormat& from, const MemFormat& to);
std::unique_ptr<ConcatKernel> make_concat(const std::vector<MemFormat>& srcs);
std::unique_ptr<VectorOps> make_vector_ops(DType dtype);
// bf16 and fp16, emulated around the float32 kernels (half_emulation.cpp).
std::unique_ptr<ConvKernel> make_half_conv(const ConvDesc& d);
std::unique_ptr<DenseKernel> make_half_dense(const DenseDesc& d);
std::unique_ptr<PoolKernel> make_half_pool(const PoolDesc& d);
std::unique_ptr<EltwiseKernel> make_half_eltwise(const EltwiseDesc& d, const MemFormat& f);
// The registered kernels' 16-bit versions wrap their float32 kernel (`inner`, made from the same
// descriptor with dtype f32); their parameters and parameter gradients stay float32.
std::unique_ptr<BatchNormKernel> make_half_batch_norm(const BatchNormDesc& d,
                                                      std::unique_ptr<BatchNormKernel> inner);
std::unique_ptr<ChannelAffineKernel> make_half_channel_affine(
    const ChannelAffineDesc& d, std::unique_ptr<ChannelAffineKernel> inner);
std::unique_ptr<ExpandKernel> make_half_expand(const ExpandDesc& d,
                                               std::unique_ptr<ExpandKernel> inner);

// Spatial extents widened to three dimensions by prepending 1s (or `fill`), so one loop nest
// over (d, h, w) serves 1-D, 2-D and 3-D alike while row-major offsets stay unchanged.
using Dims3 = std::array<int64_t, 3>;

inline Dims3 widen(const std::array<int64_t, 3>& v, int rank, int64_t fill) {
  Dims3 r{fill, fill, fill};
  for (int i = 0; i < rank; ++i) r[static_cast<size_t>(3 - rank + i)] = v[static_cast<size_t>(i)];
  return r;
}

inline int64_t volume(const Dims3& d) { return d[0] * d[1] * d[2]; }

// "[4, 4]": the first `rank` entries, for error messages.
inline std::string dims_str(const std::array<int64_t, 3>& v, int rank) {
  std::string s = "[";
  for (int i = 0; i < rank; ++i) s += (i ? ", " : "") + std::to_string(v[static_cast<size_t>(i)]);
  return s + "]";
}

// "[i]" for error messages. Built by appending: GCC 12 misreports `"[" + std::to_string(i)` under
// -Wrestrict once inlined.
inline std::string axis_label(int i) {
  std::string s = "[";
  s += std::to_string(i);
  s += ']';
  return s;
}

// Logical activation shape [n, c, spatial...].
inline Shape activation_shape(int64_t n, int64_t c, const std::array<int64_t, 3>& size, int rank) {
  std::vector<int64_t> dims{n, c};
  for (int i = 0; i < rank; ++i) dims.push_back(size[static_cast<size_t>(i)]);
  return Shape(dims);
}

// The reference backend computes in f32 and f64 only.
inline void require_float_dtype(DType t, const std::string& what) {
  if (t != DType::f32 && t != DType::f64)
    throw_input(what + ": the reference backend computes in f32 or f64 only, got " + dtype_name(t));
}

}  // namespace crest::reference
