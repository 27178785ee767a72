// Activations as a kernel family: the launches of elementwise.cu over a whole tensor.
#include "cuda/cuda_kernels.hpp"

namespace crest::cuda {
namespace {

class CudaEltwise final : public EltwiseKernel {
 public:
  CudaEltwise(std::shared_ptr<Context> context, const EltwiseDesc& d, const MemFormat& f)
      : c_(std::move(context)), d_(d), count_(static_cast<size_t>(f.shape.numel())) {}

  void forward(const void* src, void* dst) override {
    eltwise_forward_f32(d_, static_cast<const float*>(src), static_cast<float*>(dst), count_,
                        c_->stream);
  }
  void backward(const void* dst, const void* diff_dst, void* diff_src) override {
    eltwise_backward_f32(d_, static_cast<const float*>(dst), static_cast<const float*>(diff_dst),
                         static_cast<float*>(diff_src), count_, c_->stream);
  }

 private:
  std::shared_ptr<Context> c_;
  EltwiseDesc d_;
  size_t count_;
};

}  // namespace

std::unique_ptr<EltwiseKernel> make_eltwise(std::shared_ptr<Context> context, const EltwiseDesc& d,
                                            const MemFormat& f) {
  return std::make_unique<CudaEltwise>(std::move(context), d, f);
}

}  // namespace crest::cuda
