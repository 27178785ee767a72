// Max and average pooling through cuDNN. cuDNN's backward pass reads the forward's input and
// output, which crest's PoolKernel does not hand back: the forward keeps copies of both in the
// workspace (kept from forward to backward, as oneDNN's max indices are).
#include <array>
#include <string>

#include "cuda/check.hpp"
#include "cuda/cuda_kernels.hpp"
#include "cuda/cudnn_descriptors.hpp"

namespace crest::cuda {
namespace {

cudnnPoolingMode_t pooling_mode(PoolKind kind) {
  switch (kind) {
    case PoolKind::max:
      return CUDNN_POOLING_MAX_DETERMINISTIC;
    case PoolKind::avg_include_pad:
      return CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
    case PoolKind::avg_exclude_pad:
      return CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  }
  return CUDNN_POOLING_MAX_DETERMINISTIC;
}

MemFormat pool_format(const PoolDesc& d, const std::array<int64_t, 3>& size) {
  std::vector<int64_t> dims{d.n, d.channels};
  dims.insert(dims.end(), size.begin(), size.begin() + d.spatial_rank);
  return plain_format(Shape(dims), d.dtype);
}

class CudnnPool final : public PoolKernel {
 public:
  CudnnPool(std::shared_ptr<Context> context, const PoolDesc& d)
      : c_(std::move(context)),
        src_format_(pool_format(d, d.in_size)),
        dst_format_(pool_format(d, d.out_size)),
        src_(d.dtype, d.n, d.channels, d.in_size.data(), d.spatial_rank),
        dst_(d.dtype, d.n, d.channels, d.out_size.data(), d.spatial_rank) {
    CREST_CUDNN(cudnnCreatePoolingDescriptor(&pool_));
    const int r = d.spatial_rank;
    const auto window = cudnn_extents(d.kernel.data(), r, 1);
    const auto pad = cudnn_extents(d.pad_lo.data(), r, 0);
    const auto stride = cudnn_extents(d.stride.data(), r, 1);
    CREST_CUDNN(cudnnSetPoolingNdDescriptor(pool_, pooling_mode(d.kind), CUDNN_NOT_PROPAGATE_NAN,
                                            static_cast<int>(window.size()), window.data(),
                                            pad.data(), stride.data()));
    std::array<int, 5> got{};
    CREST_CUDNN(cudnnGetPoolingNdForwardOutputDim(pool_, src_.get(),
                                                  static_cast<int>(window.size()) + 2, got.data()));
    for (int i = 0; i < r; ++i)
      if (got[static_cast<size_t>(i) + 2] != d.out_size[static_cast<size_t>(i)]) {
        cudnnDestroyPoolingDescriptor(pool_);
        throw_usage("the cuda backend cannot run this pooling: cuDNN derives extent " +
                    std::to_string(got[static_cast<size_t>(i) + 2]) + " on spatial axis " +
                    std::to_string(i) + " where the layer has " +
                    std::to_string(d.out_size[static_cast<size_t>(i)]));
      }
  }
  ~CudnnPool() override { cudnnDestroyPoolingDescriptor(pool_); }
  CudnnPool(const CudnnPool&) = delete;
  CudnnPool& operator=(const CudnnPool&) = delete;

  MemFormat src_format() const override { return src_format_; }
  MemFormat dst_format() const override { return dst_format_; }
  size_t workspace_bytes() const override { return src_format_.bytes + dst_format_.bytes; }
  size_t scratch_bytes() const override { return 0; }

  void forward(const void* src, void* dst, void* workspace, void* /*scratch*/) override {
    const float one = 1.f, zero = 0.f;
    CREST_CUDNN(
        cudnnPoolingForward(c_->cudnn, pool_, &one, src_.get(), src, &zero, dst_.get(), dst));
    if (workspace == nullptr) return;  // inference: no backward follows
    char* w = static_cast<char*>(workspace);
    CREST_CUDA(cudaMemcpyAsync(w, src, src_format_.bytes, cudaMemcpyDeviceToDevice, c_->stream));
    CREST_CUDA(cudaMemcpyAsync(w + src_format_.bytes, dst, dst_format_.bytes,
                               cudaMemcpyDeviceToDevice, c_->stream));
  }

  void backward(const void* diff_dst, const void* workspace, void* diff_src,
                void* /*scratch*/) override {
    const float one = 1.f, zero = 0.f;
    const char* w = static_cast<const char*>(workspace);
    CREST_CUDNN(cudnnPoolingBackward(c_->cudnn, pool_, &one, dst_.get(), w + src_format_.bytes,
                                     dst_.get(), diff_dst, src_.get(), w, &zero, src_.get(),
                                     diff_src));
  }

 private:
  std::shared_ptr<Context> c_;
  MemFormat src_format_, dst_format_;
  TensorDescriptor src_, dst_;
  cudnnPoolingDescriptor_t pool_ = nullptr;
};

}  // namespace

Support pool_support(const PoolDesc& d) {
  for (int i = 0; i < d.spatial_rank; ++i)
    if (d.pad_lo[static_cast<size_t>(i)] != d.pad_hi[static_cast<size_t>(i)])
      return Support::no("cuDNN pads both sides of an axis alike; this pooling pads " +
                         std::to_string(d.pad_lo[static_cast<size_t>(i)]) + " before and " +
                         std::to_string(d.pad_hi[static_cast<size_t>(i)]) + " after on axis " +
                         std::to_string(i));
  return Support::yes();
}

std::unique_ptr<PoolKernel> make_pool(std::shared_ptr<Context> context, const PoolDesc& d) {
  return std::make_unique<CudnnPool>(std::move(context), d);
}

}  // namespace crest::cuda
