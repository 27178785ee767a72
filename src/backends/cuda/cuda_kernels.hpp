// Private to the CUDA backend: the per-family kernel factories (one file each) and what the
// backend asks them before creating anything.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "cuda/context.hpp"

namespace crest::cuda {

// The context of a backend that is the cuda backend (what a registered kernel's maker receives);
// throws crest::Error (runtime) for any other backend.
std::shared_ptr<Context> context_of(Backend& backend);

Support conv_support(const ConvDesc& d);
Support pool_support(const PoolDesc& d);

// `hint`: the producer's format, which the kernel computes in where it can (computed_layout).
std::unique_ptr<ConvKernel> make_conv(std::shared_ptr<Context> context, const ConvDesc& d,
                                      const MemFormat& hint);
std::unique_ptr<PoolKernel> make_pool(std::shared_ptr<Context> context, const PoolDesc& d,
                                      const MemFormat& hint);
std::unique_ptr<DenseKernel> make_dense(std::shared_ptr<Context> context, const DenseDesc& d);
std::unique_ptr<EltwiseKernel> make_eltwise(std::shared_ptr<Context> context, const EltwiseDesc& d,
                                            const MemFormat& f);
std::unique_ptr<ReorderKernel> make_reorder(std::shared_ptr<Context> context, const MemFormat& from,
                                            const MemFormat& to);
std::unique_ptr<ConcatKernel> make_concat(std::shared_ptr<Context> context,
                                          const std::vector<MemFormat>& srcs);

// `bytes` (at most MemoryResource::kMaxWrittenValues) host bytes stored at `dst` by a one-thread
// kernel on `stream` that takes them as its argument (store_values.cu: DeviceMemory::write_values).
void write_values(void* dst, const void* values, size_t bytes, cudaStream_t stream);

// The device's n x n x n matrix-product rate for `dtype` through cuBLAS (best of `iters`).
PeakRate gemm_peak(Context& c, DType dtype, int64_t n, int iters);

// Element-wise launches shared by the kernels above (elementwise.cu), on `stream`, over values
// of `dtype`: float32, bf16 or fp16 (computed in float, a 16-bit result rounded once).
// y[i] = f(x[i]) and diff_src[i] = diff_dst[i] * f'(y[i]) for an activation; in place allowed.
void eltwise_forward(const EltwiseDesc& d, DType dtype, const void* x, void* y, size_t count,
                     cudaStream_t stream);
void eltwise_backward(const EltwiseDesc& d, DType dtype, const void* y, const void* diff_dst,
                      void* diff_src, size_t count, cudaStream_t stream);
// dst[i] = src[i] converted from `from` to `to` (to a 16-bit type: rounded to nearest even).
void convert_elements(DType from, const void* src, DType to, void* dst, size_t count,
                      cudaStream_t stream);
// Plain [n, channels, spatial] y of `dtype`: y[., c, .] += bias[c], a float32 bias. (A
// channels-last tensor is plain [n x spatial, channels, 1] here and in channel_sums.)
void add_channel_bias(DType dtype, void* y, const float* bias, size_t n, size_t channels,
                      size_t spatial, cudaStream_t stream);
// sums[c] = the sum over n and spatial of plain [n, channels, spatial] x of `dtype`, added in
// double in a fixed order and rounded to float once (channel_sum.cu); every channel gets its
// value, zero when it has none.
void channel_sums(DType dtype, const void* x, float* sums, size_t n, size_t channels,
                  size_t spatial, cudaStream_t stream);
// cuDNN pads both sides of an axis alike. For unequal padding of a tensor of extents `size`, a
// kernel gives cuDNN the `common` padding (the smaller side's) and an extension of the tensor
// (`size` grown by what each side pads beyond it, the tensor at `offset`) holding the rest as
// explicit values (copy_window).
struct PaddingExtension {
  std::array<int64_t, 3> common{0, 0, 0}, size{1, 1, 1}, offset{0, 0, 0};
  bool extended = false;  // some axis pads one side more than the other
};
PaddingExtension padding_extension(const std::array<int64_t, 3>& size,
                                   const std::array<int64_t, 3>& pad_lo,
                                   const std::array<int64_t, 3>& pad_hi, int spatial_rank);

// Plain [planes, spatial...] tensors of extents `from` and `to` (the first spatial_rank used):
// dst at position p holds src at p - offset where that lies inside src, else `fill`. A positive
// offset pads (dst larger), a negative one crops.
// Elements of `dtype` (float32, bf16 or fp16; `fill` rounded to it).
void copy_window(DType dtype, const void* src, const std::array<int64_t, 3>& from, void* dst,
                 const std::array<int64_t, 3>& to, const std::array<int64_t, 3>& offset,
                 int spatial_rank, size_t planes, cudaStream_t stream, float fill = 0.f);
// dst[b][c][r] = src[b][r][c] for `batch` row-major rows x cols matrices of 1-, 2-, 4- or 8-byte
// elements (layout_transpose.cu): the reorder between plain and channels-last layouts.
void transpose_batched(const void* src, void* dst, size_t batch, size_t rows, size_t cols,
                       size_t element_bytes, cudaStream_t stream);
// The same transpose with a conversion between float32, bf16 and fp16 on the way.
void transpose_converting(const void* src, DType from, void* dst, DType to, size_t batch,
                          size_t rows, size_t cols, cudaStream_t stream);
// Max pooling (max_pool.cu): `taps` holds, per output, the window tap of its maximum, one byte
// each where max_pool_taps_fit_a_byte (at most 255 taps), else an int32 each. Values of d.dtype,
// plain or channels-last (`layout`).
bool max_pool_taps_fit_a_byte(const PoolDesc& d);
void max_pool_forward(const PoolDesc& d, Layout layout, const void* src, void* dst, void* taps,
                      cudaStream_t stream);
void max_pool_backward(const PoolDesc& d, Layout layout, const void* diff_dst, const void* taps,
                       void* diff_src, cudaStream_t stream);

}  // namespace crest::cuda
