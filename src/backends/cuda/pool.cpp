// Pooling: max pooling through crest's own kernels (max_pool.cu: the maximum's tap kept per
// output, any padding), average pooling through cuDNN. cuDNN's backward pass reads the forward's
// input and output, which crest's PoolKernel does not hand back: its forward keeps copies of
// both in the workspace (kept from forward to backward, as oneDNN's max indices are).
//
// cuDNN pads both sides of an axis alike. Unequal padding runs on an extension of the input:
// cuDNN pads the common part, the extension holds the rest as zeros (which change nothing in an
// average that counts padding), and the input gradient is cropped back out of the extension's.
// An average that excludes padding would count the extension's zeros, so it is refused.
//
// Under mixed precision (bf16, fp16 values) max pooling runs on the 16-bit values; an average
// runs cuDNN in float32 on a widened copy of the input (the copy the workspace keeps anyway) and
// rounds its output once, the reference's emulation step by step.
//
// Both compute channels-last where the producer hands them channels-last values (context.hpp),
// except an average with unequal padding (its extension is cut per plane), which computes plain.
#include <algorithm>
#include <array>
#include <string>

#include "cuda/check.hpp"
#include "cuda/cuda_kernels.hpp"
#include "cuda/cudnn_descriptors.hpp"

namespace crest::cuda {
namespace {

// cuDNN runs the averages only (max pooling is CrestMaxPool's).
cudnnPoolingMode_t average_mode(PoolKind kind) {
  return kind == PoolKind::avg_include_pad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                           : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
}

MemFormat pool_format(const PoolDesc& d, const std::array<int64_t, 3>& size, DType dtype,
                      Layout layout) {
  std::vector<int64_t> dims{d.n, d.channels};
  dims.insert(dims.end(), size.begin(), size.begin() + d.spatial_rank);
  return plain_format(Shape(dims), dtype, layout);
}

size_t count_of(const MemFormat& f) { return static_cast<size_t>(f.shape.numel()); }

class CrestMaxPool final : public PoolKernel {
 public:
  CrestMaxPool(std::shared_ptr<Context> context, const PoolDesc& d, Layout layout)
      : c_(std::move(context)),
        d_(d),
        layout_(layout),
        src_format_(pool_format(d, d.in_size, d.dtype, layout)),
        dst_format_(pool_format(d, d.out_size, d.dtype, layout)) {}

  MemFormat src_format() const override { return src_format_; }
  MemFormat dst_format() const override { return dst_format_; }
  // The maximum's tap per output.
  size_t workspace_bytes() const override {
    const auto outputs = static_cast<size_t>(dst_format_.shape.numel());
    return outputs * (max_pool_taps_fit_a_byte(d_) ? 1 : sizeof(int32_t));
  }
  size_t scratch_bytes() const override { return 0; }

  void forward(const void* src, void* dst, void* workspace, void* /*scratch*/) override {
    max_pool_forward(d_, layout_, src, dst, workspace, c_->stream);
  }
  void backward(const void* diff_dst, const void* workspace, void* diff_src,
                void* /*scratch*/) override {
    max_pool_backward(d_, layout_, diff_dst, workspace, diff_src, c_->stream);
  }

 private:
  std::shared_ptr<Context> c_;
  PoolDesc d_;
  Layout layout_;
  MemFormat src_format_, dst_format_;
};

// Average pooling through cuDNN, in float32 for 16-bit values too (`wide_`).
class CudnnPool final : public PoolKernel {
 public:
  // `layout`: plain, or channels-last where the padding is equal on both sides.
  CudnnPool(std::shared_ptr<Context> context, const PoolDesc& d, Layout layout)
      : c_(std::move(context)),
        d_(d),
        wide_(is_half(d.dtype)),
        e_(padding_extension(d.in_size, d.pad_lo, d.pad_hi, d.spatial_rank)),
        src_format_(pool_format(d, d.in_size, d.dtype, layout)),
        dst_format_(pool_format(d, d.out_size, d.dtype, layout)),
        ext_format_(pool_format(d, e_.size, computed(), layout)),
        out_format_(pool_format(d, d.out_size, computed(), layout)),
        src_(computed(), d.n, d.channels, e_.size.data(), d.spatial_rank, layout),
        dst_(computed(), d.n, d.channels, d.out_size.data(), d.spatial_rank, layout) {
    CREST_CHECK(!e_.extended || layout == Layout::plain,
                "a pooling with unequal padding computes plain");
    CREST_CUDNN(cudnnCreatePoolingDescriptor(&pool_));
    try {
      describe();
    } catch (...) {
      cudnnDestroyPoolingDescriptor(pool_);
      throw;
    }
  }
  ~CudnnPool() override { cudnnDestroyPoolingDescriptor(pool_); }
  CudnnPool(const CudnnPool&) = delete;
  CudnnPool& operator=(const CudnnPool&) = delete;

  MemFormat src_format() const override { return src_format_; }
  MemFormat dst_format() const override { return dst_format_; }
  // The (extended) input and the output as cuDNN computed with them, for cuDNN's backward.
  size_t workspace_bytes() const override { return ext_format_.bytes + out_format_.bytes; }
  // The extended input's gradient, cropped into diff_src; widened, also the output's gradient
  // and the cropped input gradient before it is rounded.
  size_t scratch_bytes() const override {
    const size_t cropped = e_.extended ? wide_src_bytes() : 0;
    if (wide_) return out_format_.bytes + ext_format_.bytes + cropped;
    return e_.extended ? ext_format_.bytes : 0;
  }

  void forward(const void* src, void* dst, void* workspace, void* scratch) override {
    if (wide_) return forward_widened(src, dst, workspace, scratch);
    const float one = 1.f, zero = 0.f;
    char* w = static_cast<char*>(workspace);
    const void* x = src;
    if (e_.extended) {  // the extension lives in the workspace, where backward reads it
      copy_window(d_.dtype, src, d_.in_size, w, e_.size, e_.offset, d_.spatial_rank, planes(),
                  c_->stream);
      x = w;
    }
    CREST_CUDNN(cudnnPoolingForward(c_->cudnn, pool_, &one, src_.get(), x, &zero, dst_.get(), dst));
    if (!e_.extended)
      CREST_CUDA(cudaMemcpyAsync(w, src, src_format_.bytes, cudaMemcpyDeviceToDevice, c_->stream));
    CREST_CUDA(cudaMemcpyAsync(w + ext_format_.bytes, dst, dst_format_.bytes,
                               cudaMemcpyDeviceToDevice, c_->stream));
  }

  void backward(const void* diff_dst, const void* workspace, void* diff_src,
                void* scratch) override {
    if (wide_) return backward_widened(diff_dst, workspace, diff_src, scratch);
    const float one = 1.f, zero = 0.f;
    const char* w = static_cast<const char*>(workspace);
    void* dx = e_.extended ? scratch : diff_src;
    CREST_CUDNN(cudnnPoolingBackward(c_->cudnn, pool_, &one, dst_.get(), w + ext_format_.bytes,
                                     dst_.get(), diff_dst, src_.get(), w, &zero, src_.get(), dx));
    if (!e_.extended) return;
    copy_window(d_.dtype, scratch, e_.size, diff_src, d_.in_size, crop_offset(), d_.spatial_rank,
                planes(), c_->stream);
  }

 private:
  size_t planes() const { return static_cast<size_t>(d_.n * d_.channels); }
  DType computed() const { return wide_ ? DType::f32 : d_.dtype; }
  size_t wide_src_bytes() const { return count_of(src_format_) * sizeof(float); }
  std::array<int64_t, 3> crop_offset() const {
    return {-e_.offset[0], -e_.offset[1], -e_.offset[2]};
  }

  // 16-bit values: the workspace keeps the widened (extended) input and cuDNN's float32 output,
  // which is rounded into dst. Scratch holds the widened input before its extension.
  void forward_widened(const void* src, void* dst, void* workspace, void* scratch) {
    const float one = 1.f, zero = 0.f;
    char* x = static_cast<char*>(workspace);
    char* y = x + ext_format_.bytes;
    void* wide = e_.extended ? scratch : x;
    convert_elements(d_.dtype, src, DType::f32, wide, count_of(src_format_), c_->stream);
    if (e_.extended)
      copy_window(DType::f32, wide, d_.in_size, x, e_.size, e_.offset, d_.spatial_rank, planes(),
                  c_->stream);
    CREST_CUDNN(cudnnPoolingForward(c_->cudnn, pool_, &one, src_.get(), x, &zero, dst_.get(), y));
    convert_elements(DType::f32, y, d_.dtype, dst, count_of(dst_format_), c_->stream);
  }

  // Scratch: the widened output gradient, the extended input's gradient, then (extended) that
  // gradient cropped, each float32; the input's gradient is rounded once at the end.
  void backward_widened(const void* diff_dst, const void* workspace, void* diff_src,
                        void* scratch) {
    const float one = 1.f, zero = 0.f;
    const char* x = static_cast<const char*>(workspace);
    const char* y = x + ext_format_.bytes;
    char* dy = static_cast<char*>(scratch);
    char* dx = dy + out_format_.bytes;
    char* cropped = dx + ext_format_.bytes;
    convert_elements(d_.dtype, diff_dst, DType::f32, dy, count_of(dst_format_), c_->stream);
    CREST_CUDNN(cudnnPoolingBackward(c_->cudnn, pool_, &one, dst_.get(), y, dst_.get(), dy,
                                     src_.get(), x, &zero, src_.get(), dx));
    const char* dx_of_src = dx;
    if (e_.extended) {
      copy_window(DType::f32, dx, e_.size, cropped, d_.in_size, crop_offset(), d_.spatial_rank,
                  planes(), c_->stream);
      dx_of_src = cropped;
    }
    convert_elements(DType::f32, dx_of_src, d_.dtype, diff_src, count_of(src_format_), c_->stream);
  }

  // The pooling descriptor, and the check that cuDNN derives the layer's output extents.
  void describe() {
    const int r = d_.spatial_rank;
    const auto window = cudnn_extents(d_.kernel.data(), r, 1);
    const auto pad = cudnn_extents(e_.common.data(), r, 0);
    const auto stride = cudnn_extents(d_.stride.data(), r, 1);
    CREST_CUDNN(cudnnSetPoolingNdDescriptor(pool_, average_mode(d_.kind), CUDNN_NOT_PROPAGATE_NAN,
                                            static_cast<int>(window.size()), window.data(),
                                            pad.data(), stride.data()));
    std::array<int, 5> got{};
    CREST_CUDNN(cudnnGetPoolingNdForwardOutputDim(pool_, src_.get(),
                                                  static_cast<int>(window.size()) + 2, got.data()));
    for (int i = 0; i < r; ++i)
      if (got[static_cast<size_t>(i) + 2] != d_.out_size[static_cast<size_t>(i)])
        throw_usage("the cuda backend cannot run this pooling: cuDNN derives extent " +
                    std::to_string(got[static_cast<size_t>(i) + 2]) + " on spatial axis " +
                    std::to_string(i) + " where the layer has " +
                    std::to_string(d_.out_size[static_cast<size_t>(i)]));
  }

  std::shared_ptr<Context> c_;
  PoolDesc d_;
  bool wide_;  // 16-bit values, pooled in float32
  PaddingExtension e_;
  MemFormat src_format_, dst_format_;  // the layer's
  MemFormat ext_format_, out_format_;  // cuDNN's input (the extension where there is one), output
  TensorDescriptor src_, dst_;         // the same, for cuDNN
  cudnnPoolingDescriptor_t pool_ = nullptr;
};

}  // namespace

Support pool_support(const PoolDesc& d) {
  if (d.dtype != DType::f32 && !is_half(d.dtype))
    return Support::no("the cuda backend's pooling runs float32, bf16 or fp16, not " +
                       dtype_name(d.dtype));
  for (int i = 0; i < d.spatial_rank; ++i) {
    const int64_t lo = d.pad_lo[static_cast<size_t>(i)], hi = d.pad_hi[static_cast<size_t>(i)];
    if (lo < 0 || hi < 0)
      return Support::no("the cuda backend cannot crop a pooling's input (negative padding " +
                         std::to_string(lo) + ", " + std::to_string(hi) + " on axis " +
                         std::to_string(i) + ")");
    if (lo != hi && d.kind == PoolKind::avg_exclude_pad)
      return Support::no(
          "an average that excludes padding cannot pad one side more than the "
          "other on the cuda backend (" +
          std::to_string(lo) + " before, " + std::to_string(hi) + " after on axis " +
          std::to_string(i) + ")");
  }
  return Support::yes();
}

std::unique_ptr<PoolKernel> make_pool(std::shared_ptr<Context> context, const PoolDesc& d,
                                      const MemFormat& hint) {
  const Layout layout = computed_layout(*context, hint, d.dtype);
  if (d.kind == PoolKind::max) return std::make_unique<CrestMaxPool>(std::move(context), d, layout);
  const bool unequal = padding_extension(d.in_size, d.pad_lo, d.pad_hi, d.spatial_rank).extended;
  return std::make_unique<CudnnPool>(std::move(context), d, unequal ? Layout::plain : layout);
}

}  // namespace crest::cuda
